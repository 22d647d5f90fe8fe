package main

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuTime returns the CPU time (user + system) this process has used so
// far; zero if the kernel does not say.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuMeter measures the process CPU time spent over a timed part, per
// event. Unlike a rate, it hardly moves when other processes load the
// machine; on SQLite it includes the database's own work (in process).
type cpuMeter struct{ start time.Duration }

// startCPU starts a measurement.
func startCPU() cpuMeter { return cpuMeter{start: cpuTime()} }

// perEvent returns the CPU microseconds per event since start.
func (m cpuMeter) perEvent(n int) *float64 {
	if n <= 0 {
		return nil
	}
	return round(float64(cpuTime()-m.start)/float64(time.Microsecond)/float64(n), 1)
}

// loadAvg returns the 1-minute load average from /proc/loadavg, or nil
// where there is none.
func loadAvg() *float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return nil
	}
	first, _, _ := strings.Cut(string(b), " ")
	v, err := strconv.ParseFloat(first, 64)
	if err != nil {
		return nil
	}
	return round(v, 2)
}
