package main

import (
	"errors"
	"flag"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/outbox-go/outbox/internal/timearg"
	"github.com/outbox-go/outbox/jdbcstore"
)

// Defaults of the global flags.
const (
	defaultTimeout = 10 * time.Second
	defaultLimit   = 50
)

// globals are the flags every command accepts, before or after its name.
type globals struct {
	dsn     dsnValue
	table   string
	timeout time.Duration
	json    bool
}

// newGlobals returns the defaults, with envDSN (the value of $OUTBOX_DSN)
// as the default of --dsn.
func newGlobals(envDSN string) *globals {
	return &globals{dsn: dsnValue{raw: strings.TrimSpace(envDSN)}, table: jdbcstore.DefaultTable, timeout: defaultTimeout}
}

// register defines the global flags on fs, bound to g.
func (g *globals) register(fs *flag.FlagSet) {
	fs.Var(&g.dsn, "dsn", "the `database`: a SQLite file path, a MySQL/MariaDB DSN such as\n"+
		"user:pass@tcp(host:3306)/db (a mysql:// prefix is allowed), or a PostgreSQL URL such as\n"+
		"postgres://user:pass@host:5432/db (not a jdbc: URL or a key=value string); default $"+envDSN)
	fs.StringVar(&g.table, "table", g.table, "the outbox table `name`")
	fs.DurationVar(&g.timeout, "timeout", g.timeout, "bound on the whole command, connecting included (serve, which runs until interrupted: on connecting only)")
	fs.BoolVar(&g.json, "json", g.json, "print JSON instead of aligned tables")
}

// quietFlagSet returns a flag set that reports errors to its caller only:
// run prints them as one line.
func quietFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parseInterspersed parses args with fs, allowing flags after positional
// arguments ("dead show ID --json"). Everything after "--" is positional.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// dsnValue is the --dsn flag. Its String, which the flag package shows as
// the default in --help, masks a MySQL or PostgreSQL password.
type dsnValue struct {
	raw   string
	given bool // set by the --dsn flag, not $OUTBOX_DSN
}

func (v *dsnValue) String() string {
	if v == nil {
		return ""
	}
	return maskDSN(v.raw)
}

func (v *dsnValue) Set(s string) error {
	v.raw, v.given = strings.TrimSpace(s), true
	return nil
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, " ") }

func (l *stringList) Set(s string) error {
	if s == "" {
		return errors.New("must not be empty")
	}
	*l = append(*l, s)
	return nil
}

// ageValue is a duration flag that also takes days ("7d", "1d12h") and
// remembers whether it was given.
type ageValue struct {
	d   time.Duration
	set bool
}

func (v *ageValue) String() string {
	if v == nil || !v.set {
		return ""
	}
	return formatAge(v.d)
}

func (v *ageValue) Set(s string) error {
	d, err := timearg.Age(s)
	if err != nil {
		return err
	}
	v.d, v.set = d, true
	return nil
}

// formatAge writes d with whole days as "d": 7d, 1d12h0m0s, 36m0s.
func formatAge(d time.Duration) string {
	day := 24 * time.Hour
	if d < day {
		return d.String()
	}
	s := strconv.FormatInt(int64(d/day), 10) + "d"
	if rest := d % day; rest != 0 {
		s += rest.String()
	}
	return s
}

// timeBound is a --since/--until flag: an RFC 3339 time, a UTC date or
// time (2006-01-02, 2006-01-02T15:04) or a duration ago (36h, 7d), read
// when the flag is parsed (timearg.Time).
type timeBound struct {
	t   time.Time
	raw string
	now func() time.Time
}

func (v *timeBound) String() string {
	if v == nil {
		return ""
	}
	return v.raw
}

func (v *timeBound) Set(s string) error {
	now := time.Now
	if v.now != nil {
		now = v.now
	}
	t, err := timearg.Time(s, now())
	if err != nil {
		return err
	}
	v.t, v.raw = t, strings.TrimSpace(s)
	return nil
}

// deadFilterFlags are the filters shared by dead list and dead replay.
type deadFilterFlags struct {
	eventType, tenant string
	since, until      timeBound
}

func (f *deadFilterFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.eventType, "type", "", "only events of this event `type`")
	fs.StringVar(&f.tenant, "tenant", "", "only events of this tenant `id`")
	fs.Var(&f.since, "since", "only events created at or after this `time`: RFC 3339, a UTC date or time\n(2006-01-02, 2006-01-02T15:04) or a duration ago (36h, 7d)")
	fs.Var(&f.until, "until", "only events created before this `time` (same forms as --since)")
}

// filter returns the library filter, or a usage error for an empty range.
func (f *deadFilterFlags) filter() (jdbcstore.DeadFilter, error) {
	df := jdbcstore.DeadFilter{EventType: f.eventType, TenantID: f.tenant, From: f.since.t, To: f.until.t}
	if !df.From.IsZero() && !df.To.IsZero() && !df.From.Before(df.To) {
		return df, usagef("--since %s is not before --until %s", f.since.raw, f.until.raw)
	}
	return df, nil
}
