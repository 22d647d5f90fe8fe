package dashboard

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/timearg"
	"github.com/outbox-go/outbox/jdbcstore"
)

// Input bounds of the pages.
const (
	// maxIDLen bounds an event id taken from a request (a stored id is at
	// most core.MaxEventIDLen; a longer one cannot exist).
	maxIDLen = 255
	// maxSelected bounds the ids of one replay: every event of a full
	// page, which "select all" ticks.
	maxSelected = MaxPageSize
)

// deadQuery is the filter of the DEAD list and of a replay by filter.
type deadQuery struct {
	Type, Tenant string
	Since, Until string // as given, for the form
	After        string
	Limit        int
	IDs          []string
	All          bool
	filter       jdbcstore.DeadFilter
}

// SinceAt and UntilAt are the filter's bounds as instants (RFC 3339, UTC),
// "" when unset: a confirmation form carries them rather than the bounds
// as typed, so that "10m" means the instant the preview listed, not ten
// minutes before the confirmation.
func (q deadQuery) SinceAt() string { return formatBound(q.filter.From) }

// UntilAt: see SinceAt.
func (q deadQuery) UntilAt() string { return formatBound(q.filter.To) }

func formatBound(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// parseDeadQuery reads and validates the filter parameters of v; a
// duration ago is taken from now.
func parseDeadQuery(v url.Values, defLimit int, now time.Time) (deadQuery, error) {
	var q deadQuery
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	// Exact: a type or tenant may start or end with a space, and
	// " order.created" must not select order.created.
	var err error
	if q.Type, err = formText(v, "type"); err != nil {
		bad("%v", err)
	}
	if q.Tenant, err = formText(v, "tenant"); err != nil {
		bad("%v", err)
	}
	q.Since = strings.TrimSpace(v.Get("since"))
	q.Until = strings.TrimSpace(v.Get("until"))
	q.After = v.Get("after")
	if err := checkText(q.Type, core.MaxEventTypeLen); err != nil {
		bad("type: %v", err)
	}
	if err := checkText(q.Tenant, core.MaxTenantIDLen); err != nil {
		bad("tenant: %v", err)
	}
	if err := checkText(q.After, maxIDLen); err != nil {
		bad("after: %v", err)
	}
	if q.filter.From, err = parseTime(q.Since, now); err != nil {
		bad("since: %v", err)
	}
	if q.filter.To, err = parseTime(q.Until, now); err != nil {
		bad("until: %v", err)
	}
	if !q.filter.From.IsZero() && !q.filter.To.IsZero() && !q.filter.From.Before(q.filter.To) {
		bad("since must be before until")
	}
	q.Limit = defLimit
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxPageSize {
			bad("limit must be 1..%d, got %q", MaxPageSize, trunc(20, s))
		}
		q.Limit = n
	}
	ids := v["id"]
	for _, s := range v["idq"] {
		id, err := strconv.Unquote(s)
		if err != nil {
			bad("idq must hold quoted ids, got %q", trunc(20, s))
			continue
		}
		ids = append(ids, id)
	}
	if len(ids) > maxSelected {
		bad("at most %d ids at once, got %d", maxSelected, len(ids))
		ids = nil
	}
	for _, id := range ids {
		if id == "" || slices.Contains(q.IDs, id) { // an id given twice is one event
			continue
		}
		if err := checkText(id, maxIDLen); err != nil {
			bad("id: %v", err)
			continue
		}
		q.IDs = append(q.IDs, id)
	}
	switch v.Get("all") {
	case "":
	case "1":
		q.All = true
	default:
		bad("all must be 1 when given")
	}
	q.filter.EventType, q.filter.TenantID, q.filter.IDs = q.Type, q.Tenant, q.IDs
	return q, errors.Join(errs...)
}

// formText returns the parameter name of v, given as is or, by a form
// field, quoted in name+"q" (see formName): a browser sends the line
// breaks of a form's values as CR LF whatever they were, so a value that
// holds one travels quoted.
func formText(v url.Values, name string) (string, error) {
	s, q := v.Get(name), v.Get(name+"q")
	if q == "" {
		return s, nil
	}
	if s != "" {
		return "", fmt.Errorf("give %s or %sq, not both", name, name)
	}
	u, err := strconv.Unquote(q)
	if err != nil {
		return "", fmt.Errorf("%sq must be a quoted string, got %q", name, trunc(20, q))
	}
	return u, nil
}

// selected reports whether the query selects anything to replay.
func (q deadQuery) selected() bool {
	return len(q.IDs) > 0 || q.Type != "" || q.Tenant != "" || q.Since != "" || q.Until != ""
}

// checkText refuses text longer than n characters, invalid UTF-8 and
// NUL: what core and inbox refuse in ids, types and tenants. Other
// control characters are valid there, so they are taken (and shown
// escaped, see vis).
func checkText(s string, n int) error {
	if !utf8.ValidString(s) {
		return errors.New("not valid UTF-8")
	}
	if len(s) > n && utf8.RuneCountInString(s) > n {
		return fmt.Errorf("longer than %d characters", n)
	}
	if strings.IndexByte(s, 0) >= 0 {
		return errors.New("holds a NUL character")
	}
	return nil
}

// maxTimeLen bounds a time filter as typed: RFC 3339 with nanoseconds
// and an offset is 35 characters.
const maxTimeLen = 40

// parseTime reads a time filter ("" is none) as outboxctl reads --since
// and --until (timearg.Time): RFC 3339, a UTC date or time, or a
// duration ago from now.
func parseTime(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if err := checkText(s, maxTimeLen); err != nil {
		return time.Time{}, err
	}
	return timearg.Time(s, now)
}

// maxAgeLen bounds a purge age as typed.
const maxAgeLen = 20

// parseAge reads a purge age as outboxctl reads its purge ages
// (timearg.Age: a Go duration, days, or both: 36h, 7d, 1d12h) and, as
// outboxctl does, refuses a zero one, so the command line the preview
// shows takes it. "" is 0: that status is kept.
func parseAge(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	if err := checkText(s, maxAgeLen); err != nil {
		return 0, err
	}
	d, err := timearg.Age(s)
	if err != nil {
		return 0, err
	}
	if d == 0 {
		return 0, fmt.Errorf("duration %q must be positive (leave it empty to keep every event of that status)", s)
	}
	return d, nil
}

func isNotFound(err error) bool { return errors.Is(err, core.ErrNotFound) }
