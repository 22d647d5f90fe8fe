package dashboard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/inbox"
	"github.com/outbox-go/outbox/internal/cfgpath"
	"github.com/outbox-go/outbox/internal/ident"
	"github.com/outbox-go/outbox/internal/nilval"
	"github.com/outbox-go/outbox/jdbcstore"
)

// Defaults of Config.
const (
	// DefaultBasePath is where the dashboard is served when
	// Config.BasePath is empty.
	DefaultBasePath = "/"
	// DefaultPageSize is how many DEAD events a page lists by default.
	DefaultPageSize = 50
	// MaxPageSize bounds Config.PageSize and the limit a page may ask.
	// It is below outboxctl's --limit (1..jdbcstore.MaxListLimit), which
	// serves scripts: a page renders every row as HTML for people to
	// read, and its paging goes on past them.
	MaxPageSize = 500
	// DefaultStatsMaxAge is how old the overview's figures may be before
	// they are read again.
	DefaultStatsMaxAge = 5 * time.Second
	// DefaultActivityBuckets and DefaultActivityWidth make the overview's
	// throughput chart: the last hour in five-minute bars.
	DefaultActivityBuckets = 12
	DefaultActivityWidth   = 5 * time.Minute
	// DefaultMaxConcurrentReads is how many database calls the dashboard
	// runs at once by default.
	DefaultMaxConcurrentReads = 2
	// MaxConcurrentReadsLimit bounds Config.MaxConcurrentReads.
	MaxConcurrentReadsLimit = 64
	// DefaultQueryTimeout bounds the database work of a page load by
	// default.
	DefaultQueryTimeout = 30 * time.Second
	// DefaultTitle names the dashboard in page titles.
	DefaultTitle = "outbox"
)

// Store is what the dashboard reads and changes in one database: the
// inspection and operation methods of *jdbcstore.Store, which implements
// it. Lists read ListDeadSummaries, never the payloads; Get reads the one
// event a page shows. ReplayDead changes rows only when
// Config.AllowMutations is set: otherwise it is only called in a dry run
// (ReplayOptions.DryRun), as is every replay preview. Purge is only
// called in a dry run (the dashboard previews purges, it never runs
// them).
type Store interface {
	StatsWith(ctx context.Context, o jdbcstore.StatsOptions) (jdbcstore.Stats, error)
	DeadTypes(ctx context.Context, offset, limit int) ([]jdbcstore.DeadTypeCount, error)
	Activity(ctx context.Context, buckets int, width time.Duration) ([]jdbcstore.ActivityBucket, error)
	BlockedKeys(ctx context.Context, limit int) ([]jdbcstore.BlockedKey, error)
	ListDeadSummaries(ctx context.Context, f jdbcstore.DeadFilter, after string, limit int) ([]jdbcstore.DeadSummary, error)
	Get(ctx context.Context, id string) (core.Record, error)
	ReplayDead(ctx context.Context, f jdbcstore.DeadFilter, o jdbcstore.ReplayOptions) (jdbcstore.ReplayResult, error)
	Purge(ctx context.Context, o jdbcstore.PurgeOptions) (jdbcstore.PurgeResult, error)
}

var _ Store = (*jdbcstore.Store)(nil)

// Inbox is what the dashboard reads of an inbox table: the operator
// methods of *inbox.Inbox, which implements it. Lists read the start of
// the payloads only (ListPreview).
type Inbox interface {
	CountByStatus(ctx context.Context) (map[inbox.Status]int, error)
	ListPreview(ctx context.Context, status inbox.Status, after inbox.Key, limit, previewBytes int) ([]inbox.Record, error)
}

var _ Inbox = (*inbox.Inbox)(nil)

// Database is one database of a tenant set, as the dashboard's database
// selector offers it.
type Database struct {
	// Name is shown in the selector and travels in the db query
	// parameter: 1..64 characters of letters, digits, '.', '_' or '-',
	// unique in the set.
	Name string
	// Store is the outbox store of that database.
	Store Store
	// Inbox, when set, is the inbox of that database: the dashboard then
	// lists its dead and pending messages. A nil pointer (a nil
	// *inbox.Inbox) is no inbox.
	Inbox Inbox
}

// Config configures the dashboard. Exactly one of Store and Databases is
// set; every other field is optional.
type Config struct {
	// Store is the outbox store of a single database. A nil pointer (a
	// nil *jdbcstore.Store) is no store.
	Store Store
	// Inbox, when set with Store, is the inbox of that database: the
	// dashboard then lists its dead and pending messages. A nil pointer
	// (a nil *inbox.Inbox) is no inbox.
	Inbox Inbox
	// Databases are the databases of a tenant set, in selector order; the
	// first is shown by default.
	Databases []Database

	// BasePath is the path the handler is mounted at, starting and ending
	// with '/': mount the handler with mux.Handle(BasePath, h) (no
	// http.StripPrefix). Defaults to DefaultBasePath.
	BasePath string
	// AllowMutations enables the replay of DEAD events. Without it the
	// dashboard is read-only and refuses every POST.
	AllowMutations bool
	// ShowPayloads shows event payloads and header values. They may hold
	// personal data, so by default only their size and the header names
	// are shown.
	ShowPayloads bool
	// TrustedOrigins are further origins ("https://ops.example.com") whose
	// pages may POST to the dashboard, for example behind a reverse proxy
	// that rewrites the Host header. The dashboard's own origin is always
	// trusted. Each is an http or https URL with a host and nothing after
	// it but an optional "/": New refuses one with user info, a path, a
	// query (even an empty "?") or a fragment, which a browser's Origin
	// header never carries. The scheme and host are compared in lower
	// case and a default port (:443 for https, :80 for http) as none, as
	// browsers send them: "HTTPS://Ops.Example.com:443/" trusts
	// "https://ops.example.com".
	TrustedOrigins []string
	// AllowedHosts are the hosts the dashboard answers to: a request whose
	// Host header names another is refused with 421 Misdirected Request
	// before anything else runs, Middleware included. Each is a host name
	// or an IP address, with or without a port: "ops.example.com",
	// "127.0.0.1", "[::1]", "localhost:8080". Without a port any port
	// matches; with one only that port (browsers leave out :80 and :443,
	// so name those hosts without a port). Names are compared in lower
	// case and without a trailing dot, IP addresses in their canonical
	// form. New refuses an entry with a scheme, user info, a path, spaces
	// or "*", and a name ending in a number that is no IPv4 address in
	// dotted-decimal form ("127.0.0.01", "127.1", "0x7f.0.0.1"): browsers
	// read such a host as an IPv4 address and send it as 127.0.0.1.
	//
	// Empty, the default, answers to any host: right when the handler is
	// mounted in an application that authenticates its users (Middleware)
	// on a public name. A dashboard that authenticates nobody and relies
	// on a private address (loopback, a private network) instead must set
	// it to the names and addresses it is reached by: otherwise DNS
	// rebinding defeats that address. A web page an operator visits at
	// http://attacker.example:8080 rebinds attacker.example to 127.0.0.1,
	// and its requests to the dashboard are then same-origin: the
	// cross-origin check and the CSRF token let them through, the page
	// reads the dead letters and, with AllowMutations, replays them. Only
	// the Host header (attacker.example) tells them apart. `outboxctl
	// serve` sets it by default.
	AllowedHosts []string
	// Middleware, when set, wraps every request of the dashboard: the
	// place for the application's authentication and authorization (the
	// dashboard authenticates nobody). A middleware that rejects a request
	// simply does not call the next handler.
	Middleware func(http.Handler) http.Handler
	// PageSize is how many DEAD events a page lists unless the page asks
	// otherwise. 1..MaxPageSize; defaults to DefaultPageSize.
	PageSize int
	// StatsMaxAge is how old the overview's figures (counts, lag,
	// throughput, blocked keys) may be before they are read again. Their
	// queries count the whole table, so they are shared: concurrent page
	// loads wait on one read, and a load that finds figures older than
	// StatsMaxAge gets them at once while one read refreshes them in the
	// background (the page says when they were read and, when a later
	// read failed, why; the failure is logged too). A dashboard left open
	// by many operators thus costs the database at most one read per
	// StatsMaxAge. On a table so large that the read takes long, reads are
	// spaced further: one that took T is not repeated for 50 × T (a read
	// of 200 ms, then, every 10 s), so the figures never take more than 2%
	// of one connection's time. Negative reads them on every load,
	// waiting. Defaults to DefaultStatsMaxAge.
	StatsMaxAge time.Duration
	// MaxConcurrentReads bounds the database calls the dashboard runs at
	// once, over every page load and database: further loads wait their
	// turn (within QueryTimeout), so page loads never take more than that
	// many connections from the application. 1..MaxConcurrentReadsLimit;
	// defaults to DefaultMaxConcurrentReads.
	MaxConcurrentReads int
	// QueryTimeout bounds the database work of each page load (its
	// queries together, its wait for one of the MaxConcurrentReads slots
	// included) and of each confirmed replay (a POST). A page whose
	// database does not answer in time (a row lock held by another
	// transaction, a server gone silent) has its query canceled and
	// answers 504 Gateway Timeout, saying so; the failure is logged like
	// any failed read, and the slot is free for the next page. A replay
	// cut short has replayed the batches it committed
	// (jdbcstore.DefaultOpsBatch events each; the page says how many):
	// replaying again goes on with the rest. Each read of the overview's
	// figures, which runs apart from the page loads waiting on it, is
	// bounded alike. Raise it for a table so large that these queries
	// take longer, and keep the http.Server's WriteTimeout above it (or
	// the server drops the pages that take that long). On SQLite a write
	// waiting for another connection's lock waits up to the connection's
	// busy timeout whatever QueryTimeout says (SQLite's busy handler cannot
	// be interrupted). Must not be negative; defaults to
	// DefaultQueryTimeout.
	QueryTimeout time.Duration
	// Title names the dashboard in page titles: at most 100 bytes.
	// Defaults to DefaultTitle.
	Title string
	// Logger receives failed database reads and every mutation. Defaults
	// to slog.Default().
	Logger *slog.Logger
	// Now is the clock (tests). Defaults to time.Now.
	Now func() time.Time
	// Secret signs the CSRF tokens. Nil defaults to 32 random bytes drawn
	// when New runs; set it (at least 32 bytes; an empty non-nil slice is
	// refused) so that several replicas behind one load balancer accept
	// each other's tokens.
	Secret []byte
}

// maxNameLen bounds Database.Name.
const maxNameLen = ident.MaxNameLen

// withDefaults fills the optional fields. A store or inbox that is a
// nil pointer becomes nil, as the zero value it stands for: it would
// pass the nil checks and fail every page that calls it.
func (c Config) withDefaults() Config {
	if nilval.Is(c.Store) {
		c.Store = nil
	}
	if nilval.Is(c.Inbox) {
		c.Inbox = nil
	}
	c.Databases = slices.Clone(c.Databases) // never change the caller's
	for i, d := range c.Databases {
		if nilval.Is(d.Store) {
			c.Databases[i].Store = nil
		}
		if nilval.Is(d.Inbox) {
			c.Databases[i].Inbox = nil
		}
	}
	if c.BasePath == "" {
		c.BasePath = DefaultBasePath
	}
	if c.PageSize == 0 {
		c.PageSize = DefaultPageSize
	}
	if c.StatsMaxAge == 0 {
		c.StatsMaxAge = DefaultStatsMaxAge
	}
	if c.Title == "" {
		c.Title = DefaultTitle
	}
	if c.MaxConcurrentReads == 0 {
		c.MaxConcurrentReads = DefaultMaxConcurrentReads
	}
	if c.QueryTimeout == 0 {
		c.QueryTimeout = DefaultQueryTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// validate reports every invalid field at once.
func (c Config) validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &core.ConfigError{Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	if cfgpath.NoHandler(c.Logger) {
		bad("Logger", "%s", cfgpath.NoHandlerMsg)
	}
	switch {
	case c.Store == nil && len(c.Databases) == 0:
		bad("Store", "is nil and Databases is empty: give one of them")
	case c.Store != nil && len(c.Databases) > 0:
		bad("Databases", "is set with Store: give one of them")
	}
	if c.Inbox != nil && c.Store == nil {
		bad("Inbox", "is set without Store: a tenant set gives each Database its Inbox")
	}
	seen := map[string]bool{}
	for i, d := range c.Databases {
		field := fmt.Sprintf("Databases[%d]", i)
		if err := ident.CheckName(d.Name); err != nil {
			bad(field+".Name", "%v", err)
		} else if seen[d.Name] {
			bad(field+".Name", "%q is used twice", d.Name)
		}
		seen[d.Name] = true
		if d.Store == nil {
			bad(field+".Store", "is nil")
		}
	}
	if !strings.HasPrefix(c.BasePath, "/") || !strings.HasSuffix(c.BasePath, "/") {
		bad("BasePath", "must start and end with '/', got %q", c.BasePath)
	} else if u, err := url.Parse(c.BasePath); err != nil || u.Path != c.BasePath || strings.Contains(c.BasePath, "//") ||
		strings.ContainsFunc(c.BasePath, notPlainPath) || // a '\' makes "/\evil/" a redirect off the host
		(c.BasePath != "/" && path.Clean(c.BasePath)+"/" != c.BasePath) { // no "." or ".." segment: browsers remove them
		bad("BasePath", "must be a plain path such as /ops/outbox/, got %q", c.BasePath)
	}
	if c.PageSize < 1 || c.PageSize > MaxPageSize {
		bad("PageSize", "must be 1..%d, got %d", MaxPageSize, c.PageSize)
	}
	for i, o := range c.TrustedOrigins {
		if _, err := origin(o); err != nil {
			bad(fmt.Sprintf("TrustedOrigins[%d]", i), "%v", err)
		}
	}
	for i, h := range c.AllowedHosts {
		if _, err := checkAllowedHost(h); err != nil {
			bad(fmt.Sprintf("AllowedHosts[%d]", i), "%v", err)
		}
	}
	if c.MaxConcurrentReads < 1 || c.MaxConcurrentReads > MaxConcurrentReadsLimit {
		bad("MaxConcurrentReads", "must be 1..%d, got %d", MaxConcurrentReadsLimit, c.MaxConcurrentReads)
	}
	if c.QueryTimeout < 0 {
		bad("QueryTimeout", "must not be negative, got %s", c.QueryTimeout)
	}
	if c.Secret != nil && len(c.Secret) < 32 {
		bad("Secret", "must hold at least 32 bytes, got %d", len(c.Secret))
	}
	if len(c.Title) > 100 {
		bad("Title", "must be at most 100 bytes, got %d", len(c.Title))
	}
	return errors.Join(errs...)
}

// origin returns the trusted origin o as a browser sends it in an Origin
// header: scheme and host in lower case, no default port, no trailing
// slash. It refuses what no Origin header can equal.
func origin(o string) (string, error) {
	u, err := url.Parse(o)
	switch {
	case strings.Contains(o, "@"): // user info, or an unescaped @ in it
		// Not quoted: the user info may hold a password.
		return "", errors.New("must be an origin such as https://ops.example.com, without user info (user:password@)")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.ForceQuery || strings.Contains(o, "#"):
		return "", fmt.Errorf("must be an origin such as https://ops.example.com (no path, query or fragment), got %q", o)
	}
	if _, err := checkAllowedHost(u.Host); err != nil {
		// A host no browser sends (a wildcard, a port past 65535): it
		// could never match.
		return "", fmt.Errorf("must be an origin such as https://ops.example.com: its host %q: %v", u.Host, err)
	}
	host := strings.ToLower(u.Host)
	host = strings.TrimSuffix(host, map[string]string{"http": ":80", "https": ":443"}[u.Scheme])
	host = strings.TrimSuffix(host, ":") // an empty port is none
	return u.Scheme + "://" + host, nil
}

// notPlainPath reports a rune a plain BasePath does not hold: anything but
// ASCII letters, digits, '/', '-', '.', '_' and '~' (RFC 3986's unreserved
// characters). A backslash is the danger: browsers read "/\evil.example/"
// in a redirect as "//evil.example/", another host.
func notPlainPath(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		return false
	}
	return !strings.ContainsRune("/-._~", r)
}
