package core

import "strings"

// The W3C Trace Context headers (https://www.w3.org/TR/trace-context/).
const (
	headerTraceparent = "traceparent"
	headerTracestate  = "tracestate"
)

// validTraceparent reports whether v is a traceparent header a W3C Trace
// Context propagator reads: version, trace id, parent id and flags in
// lowercase hex, separated by '-'; neither id all zeros; version ff
// forbidden; version 00 with nothing after the flags and no reserved
// flag bits (the OpenTelemetry propagator's rule), a later version with
// anything after a further '-'. A receiver must discard any other value
// and start a new trace.
func validTraceparent(v string) bool {
	version, v, _ := strings.Cut(v, "-")
	traceID, v, _ := strings.Cut(v, "-")
	parentID, v, _ := strings.Cut(v, "-")
	flags, rest, more := strings.Cut(v, "-")
	if !lowerHex(version, 2) || version == "ff" || !lowerHex(traceID, 32) || !lowerHex(parentID, 16) ||
		!lowerHex(flags, 2) || allZeros(traceID) || allZeros(parentID) {
		return false
	}
	if version == "00" {
		return !more && rest == "" && flags[0] == '0' && flags[1] <= '3'
	}
	return true
}

// lowerHex reports whether s is n lowercase hexadecimal digits.
func lowerHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := range len(s) {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// allZeros reports whether s is made of '0' only.
func allZeros(s string) bool { return strings.Trim(s, "0") == "" }
