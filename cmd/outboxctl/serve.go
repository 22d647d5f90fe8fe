package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dashboard"
	"github.com/outbox-go/outbox/inbox"
	"github.com/outbox-go/outbox/internal/cfgpath"
	"github.com/outbox-go/outbox/internal/hostname"
	"github.com/outbox-go/outbox/internal/ident"
	"github.com/outbox-go/outbox/jdbcstore"
)

// Defaults of serve.
const (
	defaultServeAddr = "127.0.0.1:8080"
	// serveShutdown bounds the graceful stop after an interrupt: the
	// requests under way have that long to finish.
	serveShutdown = 5 * time.Second
	// serveCut bounds the wait, once serveShutdown ran out, for the
	// requests still under way to end after their contexts are canceled
	// (a page's database work stops at once, a replay logs how many events
	// it replayed); the connections left are then closed.
	serveCut = 2 * time.Second
)

func serveCommand() *command {
	return &command{
		name:    "serve",
		untimed: true,
		summary: "serve the web dashboard (read-only unless --allow-mutations)",
		help: `Serves the web dashboard of the outbox table (the package
github.com/outbox-go/outbox/dashboard) until interrupted: the overview (events
per status, lag, throughput and failures of the last hour, DEAD events per type,
blocked ordering keys), the DEAD events with filters and paging, one event in
full, the replay of DEAD events after a dry-run preview and a confirmation, and
a purge preview.

It listens on --addr, the loopback interface by default: the dashboard
authenticates nobody, so put it behind an authenticating proxy (add its origin
with --trusted-origin) before listening elsewhere. It is read-only unless
--allow-mutations; payloads and header values are hidden unless
--show-payloads. --timeout bounds connecting to the databases only;
--query-timeout bounds each page's database work, a replay's included: a page
whose database does not answer in time (a lock held by another transaction, a
server gone silent) answers 504 Gateway Timeout, and a replay cut short says
how many events it replayed (replaying again goes on with the rest).

It answers only to requests for the hosts localhost, 127.0.0.1 and [::1], the
host of --addr and those of the --trusted-origin origins, and refuses others
with 421 Misdirected Request: a web page can otherwise reach a dashboard on
loopback or a private network by rebinding its own name to that address (DNS
rebinding). Add the other names it is reached by (through a proxy that keeps
the Host header, or when listening on every interface) with --allowed-host,
with a port to allow only that port; --allowed-host '*' answers to any host.
It prints the URL to open: with the host of --addr, or localhost when it
listens on every interface (0.0.0.0, :: or none). A link-local IPv6 --addr
with its zone ([fe80::1%eth0]:8080) is answered to without the zone, as
clients send it.

An interrupt (Ctrl-C, SIGTERM) stops it: it stops listening and lets the
requests under way finish, for 5s at most. Those still under way then are
cut (their database work is canceled) and it exits with status 1, saying
how many; otherwise with status 0.

With --inbox-table the dashboard also lists the dead and pending messages
of that inbox table (package github.com/outbox-go/outbox/inbox) in the same
database. Both tables must exist: serve checks them before it listens.

A tenant set: give one --db NAME=DSN per database (instead of --dsn, which
--db excludes; $OUTBOX_DSN is then not used), NAME being 1..64 letters,
digits, '.', '_' or '-'; the dashboard offers a database selector.`,
		define: func(fs *flag.FlagSet) action {
			var (
				addr, base     string
				inboxTable     string
				allow, payload bool
				origins, dbs   stringList
				hosts          stringList
				queryTimeout   time.Duration
			)
			fs.StringVar(&addr, "addr", defaultServeAddr, "listen on this `host:port`")
			fs.StringVar(&base, "base-path", dashboard.DefaultBasePath, "serve the dashboard under this `path` (starts and ends with /)")
			fs.BoolVar(&allow, "allow-mutations", false, "enable the replay of DEAD events")
			fs.BoolVar(&payload, "show-payloads", false, "show payloads and header values (they may hold personal data)")
			fs.Var(&origins, "trusted-origin", "also accept POSTs from pages of this `origin` (https://ops.example.com); repeatable")
			fs.Var(&hosts, "allowed-host", "also answer to requests for this `host` (ops.internal, 10.0.0.5:8080; '*' for any); repeatable")
			fs.StringVar(&inboxTable, "inbox-table", "", "also show the inbox table `name` of each database")
			fs.Var(&dbs, "db", "a database of a tenant set as `NAME=DSN` (instead of --dsn); repeatable")
			fs.DurationVar(&queryTimeout, "query-timeout", dashboard.DefaultQueryTimeout, "bound on each page's database work (a page over it answers 504)")
			return func(ctx context.Context, s *session, _ []string) error {
				if s.g.json {
					return usagef("--json: serve prints no table to give as JSON (it serves the dashboard)")
				}
				if err := checkAddr(addr); err != nil {
					return err
				}
				if queryTimeout <= 0 {
					return usagef("--query-timeout must be positive, got %s", queryTimeout)
				}
				allowed, err := allowedHosts(addr, origins, hosts)
				if err != nil {
					return err
				}
				cfg := dashboard.Config{BasePath: base, AllowMutations: allow, ShowPayloads: payload,
					TrustedOrigins: origins, AllowedHosts: allowed, QueryTimeout: queryTimeout, Logger: serveLogger(s)}
				extra, err := openSources(ctx, s, dbs, inboxTable, &cfg)
				defer func() {
					for _, db := range extra {
						_ = db.Close()
					}
				}()
				if err != nil {
					return err
				}
				h, err := dashboard.New(cfg)
				if err != nil {
					return configUsageError(err)
				}
				return serve(ctx, s, addr, h, cfg)
			}
		},
	}
}

// checkAddr refuses an --addr that cannot be listened on whatever the
// machine: no host:port form, or a port that is no number of 0..65535 nor
// a service name (http). A usage error, before any database is opened.
func checkAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return usagef("--addr %q: want host:port (127.0.0.1:8080, :8080): %v", addr, err)
	}
	if port == "" {
		return nil // a free port, chosen by the system
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return usagef("--addr %q: the port must be a number of 0..65535 or a service name: %v", addr, err)
	}
	return nil
}

// allowedHosts returns the hosts serve answers to (dashboard's
// Config.AllowedHosts): localhost, 127.0.0.1 and [::1], the host of addr
// unless it is every interface's (see answeredHost), the hosts of the
// trusted origins and the --allowed-host hosts; nil, any host, for
// --allowed-host '*'. Every --allowed-host value is checked as the
// dashboard checks its AllowedHosts, and a bad one is bad usage naming
// the flag and the value given (the dashboard's own error named an entry
// of the list, its index shifted by the hosts serve adds).
func allowedHosts(addr string, origins, extra []string) ([]string, error) {
	if slices.Contains(extra, "*") {
		if len(extra) > 1 {
			return nil, usagef("--allowed-host '*' answers to any host: do not give other hosts with it")
		}
		return nil, nil
	}
	var bad []string
	for _, h := range extra {
		if err := hostError(h); err != nil {
			bad = append(bad, "--allowed-host "+err.Error())
		}
	}
	if len(bad) > 0 {
		return nil, usagef("%s", strings.Join(bad, "; "))
	}
	var out []string
	add := func(h string) {
		if h == "" {
			return
		}
		if strings.Contains(h, ":") && !strings.HasPrefix(h, "[") && net.ParseIP(h) != nil {
			h = "[" + h + "]" // an IPv6 address
		}
		if !slices.ContainsFunc(out, func(o string) bool { return strings.EqualFold(o, h) }) {
			out = append(out, strings.ToLower(h))
		}
	}
	add("localhost")
	add("127.0.0.1")
	add("[::1]")
	if host, _, err := net.SplitHostPort(addr); err == nil {
		h, err := answeredHost(host)
		if err != nil {
			return nil, usagef("--addr %q: the dashboard cannot answer to its host: %v", addr, err)
		}
		add(h)
	}
	for _, o := range origins {
		// An invalid origin is left out: dashboard.New refuses it, as
		// --trusted-origin (configUsageError).
		if u, err := url.Parse(o); err == nil && hostError(u.Host) == nil {
			add(u.Hostname())
		}
	}
	for _, h := range extra {
		add(h)
	}
	return out, nil
}

// answeredHost returns the host of --addr that serve answers to: "" for
// every interface's (the names it is reached by are not known) and for a
// name ending in a number that is no address (256.0.0.1: listening on it
// fails, saying so); an IPv6 address without its zone, which clients
// leave out of the Host header (http://[fe80::1%25eth0]:8080/ is asked for
// as [fe80::1]:8080, and the dashboard refuses a zone in AllowedHosts);
// otherwise the host itself, which must be a name the dashboard can allow.
func answeredHost(host string) (string, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		if everyInterface(host) {
			return "", nil
		}
		return a.WithZone("").String(), nil
	}
	if host == "" || hostname.EndsInNumber(host) {
		return "", nil
	}
	if err := hostError(host); err != nil {
		return "", err
	}
	return host, nil
}

// everyInterface reports whether host, that of an --addr, listens on every
// interface: none (:8080), 0.0.0.0 or ::.
func everyInterface(host string) bool {
	a, err := netip.ParseAddr(host)
	return host == "" || (err == nil && a.WithZone("").Unmap().IsUnspecified())
}

// hostError returns why the dashboard refuses h as an entry of its
// AllowedHosts, or nil. It asks dashboard.New itself, on a Config with
// that one entry (and no store, so that New never gets further), so that
// serve refuses exactly what the dashboard would.
func hostError(h string) error {
	_, err := dashboard.New(dashboard.Config{AllowedHosts: []string{h}})
	for _, ce := range cfgpath.All(err) {
		if ce.Field == "AllowedHosts[0]" {
			return errors.New(ce.Msg)
		}
	}
	return nil
}

// configFlags are the flags that set the dashboard.Config fields an
// operator can get wrong once the flags are checked.
var configFlags = map[string]string{
	"BasePath":       "--base-path",
	"TrustedOrigins": "--trusted-origin",
}

// configUsageError is the bad usage a dashboard.New error tells of, each
// field set by a flag named by that flag (--trusted-origin must be …)
// rather than as dashboard.Config's (TrustedOrigins[0] must be …).
func configUsageError(err error) error {
	ces := cfgpath.All(err)
	if len(ces) == 0 {
		return usagef("%v", err)
	}
	msgs := make([]string, len(ces))
	for i, ce := range ces {
		field, _, _ := strings.Cut(ce.Field, "[")
		if f, ok := configFlags[field]; ok && ce.Err == nil {
			msgs[i] = f + " " + ce.Msg
		} else {
			msgs[i] = ce.Error()
		}
	}
	return usagef("%s", strings.Join(msgs, "; "))
}

// openSources opens --dsn, or every --db, into cfg within --timeout. It
// returns the --db databases to close (the session closes --dsn's).
func openSources(ctx context.Context, s *session, dbs []string, inboxTable string, cfg *dashboard.Config) (opened []*sqlx.DB, err error) {
	if len(dbs) > 0 && s.g.dsn.given {
		return nil, usagef("--dsn and --db exclude each other: give one --db NAME=DSN per database of a tenant set, or --dsn for one database")
	}
	ctx, cancel := context.WithTimeout(ctx, s.g.timeout)
	defer cancel()
	if inboxTable != "" {
		if err := jdbcstore.ValidateTableName(inboxTable); err != nil {
			return nil, usagef("--inbox-table: %v", err)
		}
	}
	openInbox := func(db *sqlx.DB, d jdbcstore.Dialect) (dashboard.Inbox, error) {
		if inboxTable == "" {
			return nil, nil
		}
		in, err := inbox.New(ctx, db, inbox.Config{Table: inboxTable, Dialect: d, SkipSchema: true, Logger: s.logger()})
		if err != nil {
			return nil, usagef("--inbox-table: %v", err)
		}
		// serve fails at start rather than on every inbox page: a table
		// that is missing, or that is no inbox table (the outbox's).
		if err := in.CheckTable(ctx); errors.Is(err, core.ErrInvalidConfig) {
			return nil, fmt.Errorf("--inbox-table %s: %w", inboxTable, err) // there, but no inbox table
		} else if err != nil {
			return nil, fmt.Errorf("--inbox-table %s: %w (is the name right? the service that receives messages creates it: inbox.New, unless its Config.SkipSchema)", inboxTable, err)
		}
		return in, nil
	}
	if len(dbs) == 0 {
		st, err := s.open(ctx, false)
		if err != nil {
			return nil, err
		}
		if err := probeTable(ctx, st); err != nil {
			return nil, err
		}
		cfg.Store = st
		if in, err := openInbox(st.DB(), st.Dialect()); err != nil {
			return nil, err
		} else if in != nil {
			cfg.Inbox = in
		}
		return nil, nil
	}
	for _, spec := range dbs {
		name, raw, err := splitDBSpec(spec)
		if err != nil {
			return opened, err
		}
		t, err := parseTarget(raw)
		if err != nil {
			return opened, dbSpecError(name, raw, err)
		}
		db, err := t.open(ctx, false)
		if err != nil {
			return opened, dbSpecError(name, raw, err)
		}
		opened = append(opened, db)
		st, err := jdbcstore.New(db, jdbcstore.Config{Table: s.g.table, Dialect: t.dialect, Logger: s.logger()})
		if err != nil {
			return opened, usagef("%v", err)
		}
		if err := probeTable(ctx, st); err != nil {
			return opened, fmt.Errorf("--db %s: %w", name, err)
		}
		in, err := openInbox(db, t.dialect)
		if err != nil {
			return opened, fmt.Errorf("--db %s: %w", name, err)
		}
		cfg.Databases = append(cfg.Databases, dashboard.Database{Name: name, Store: st, Inbox: in})
	}
	return opened, nil
}

// splitDBSpec splits a --db value into its NAME and DSN. The NAME is
// checked before anything quotes it: a value whose text before the first
// '=' is no database name (ident.CheckName) has no NAME= at all, such as
// a DSN with parameters (user:pass@tcp(db:3306)/shop?parseTime=true), and
// the error shows the whole value as a DSN, password masked.
func splitDBSpec(spec string) (name, dsn string, err error) {
	name, dsn, ok := strings.Cut(spec, "=")
	if ok && ident.CheckName(name) == nil && dsn != "" {
		return name, dsn, nil
	}
	got := strconv.Quote(maskDSN(spec))
	if hidden(spec) {
		got = "a value not shown (it may hold a password)"
	}
	return "", "", usagef("--db: want NAME=DSN, the NAME being 1..%d letters, digits, '.', '_' or '-' (eu, tenant_7), got %s",
		ident.MaxNameLen, got)
}

// dbSpecError names the --db value a DSN error is about: "--db NAME: …"
// in place of the "--dsn: " the DSN checks begin with, the value's
// secrets masked. A usage error stays one (exit status 2).
func dbSpecError(name, raw string, err error) error {
	if ue := (*usageError)(nil); errors.As(err, &ue) {
		return usagef("--db %s: %s", name, strings.TrimPrefix(scrubSecret(ue.msg, raw), "--dsn: "))
	}
	return &scrubbedError{msg: "--db " + name + ": " + scrubSecret(err.Error(), raw), err: err}
}

// scrubbedError is an error whose text has its secrets masked but which
// keeps the error it tells of in its chain, so that report still sees
// what it is (a --timeout that ran out).
type scrubbedError struct {
	msg string // the masked text
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }

// probeTable checks that st's table exists with the columns of this
// release, so that serve fails at start rather than on every page (a
// table of an earlier release lacks the ordering columns until schema
// apply upgrades it). The name is quoted as the store's own statements
// quote it: a table named order, or a mixed-case PostgreSQL name, is
// found as they find it. (openInbox checks the inbox table.)
func probeTable(ctx context.Context, st *jdbcstore.Store) error {
	db, q := st.DB(), st.Dialect().QuoteIdent
	if _, err := db.ExecContext(ctx, "SELECT order_key, order_seq, order_skip FROM "+q(st.Table())+" WHERE 1 = 0"); err != nil {
		return missingTable(ctx, err, st)
	}
	return nil
}

// serve listens on addr and serves h until ctx is done, then stops
// gracefully: see stopServer.
func serve(ctx context.Context, s *session, addr string, h http.Handler, cfg dashboard.Config) error {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	mode := "read-only"
	if cfg.AllowMutations {
		mode = "mutations enabled"
	}
	fmt.Fprintf(s.stdout, "serving the dashboard on %s (%s); interrupt to stop\n", serveURL(addr, ln.Addr(), cfg.BasePath), mode)
	if host, port, err := net.SplitHostPort(ln.Addr().String()); err == nil {
		if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
			where := host
			if given, _, _ := net.SplitHostPort(addr); everyInterface(given) {
				// The address listened on is [::] for 0.0.0.0 too (one
				// socket for IPv4 and IPv6): say what the operator gave.
				where = "every interface (" + net.JoinHostPort(given, port) + ")"
			}
			fmt.Fprintf(s.stderr, "%s: warning: the dashboard authenticates nobody and listens on %s, not only on loopback\n", progName, where)
			if len(cfg.AllowedHosts) > 0 {
				fmt.Fprintf(s.stderr, "%s: it answers only to requests for %s: add the names it is reached by with --allowed-host\n",
					progName, strings.Join(cfg.AllowedHosts, ", "))
			}
		}
	}
	srv := newServer(h, cfg)
	var active activeConns
	srv.ConnState = active.track
	// The requests' contexts end when stopServer cuts them, not with ctx:
	// an interrupt lets the requests under way finish.
	reqCtx, cut := context.WithCancel(context.WithoutCancel(ctx))
	defer cut()
	srv.BaseContext = func(net.Listener) context.Context { return reqCtx }
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	n, err := stopServer(srv, &active, cut, serveShutdown, serveCut)
	if serr := <-done; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	switch {
	case err != nil:
		return fmt.Errorf("serve: stopping: %w", err)
	case n > 0:
		// Not the --timeout (which bounds serve's start only): no
		// context.DeadlineExceeded in the chain, which report would
		// blame on it.
		why := ""
		if cfg.QueryTimeout > serveShutdown {
			why = fmt.Sprintf(" (a page's database work may take up to --query-timeout, %s)", cfg.QueryTimeout)
		}
		return fmt.Errorf("serve: stopping: the graceful stop's %s ran out with %s still under way: cut%s",
			serveShutdown, requests(n), why)
	}
	return nil
}

// stopServer stops srv after an interrupt: it stops listening and lets
// the requests under way finish within grace. It then cancels the
// contexts of those still under way (cut), gives them up to wait more to
// end (their database work stops at once, their pages answer, a replay
// logs what it replayed), and closes the connections still open. It
// returns how many requests were still under way when grace ran out.
func stopServer(srv *http.Server, active *activeConns, cut context.CancelFunc, grace, wait time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	err := srv.Shutdown(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		return 0, err
	}
	n := active.count()
	cut()
	ctx, cancel = context.WithTimeout(context.Background(), wait)
	defer cancel()
	if srv.Shutdown(ctx) != nil {
		_ = srv.Close()
	}
	return n, nil
}

// activeConns tracks the connections of a server that have a request
// under way: being read, handled or answered (http.StateActive).
type activeConns struct {
	mu     sync.Mutex
	active map[net.Conn]bool
}

// track is the server's ConnState hook.
func (a *activeConns) track(c net.Conn, state http.ConnState) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if state != http.StateActive {
		delete(a.active, c)
		return
	}
	if a.active == nil {
		a.active = map[net.Conn]bool{}
	}
	a.active[c] = true
}

// count returns how many requests are under way.
func (a *activeConns) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.active)
}

// requests is "1 request" or "N requests".
func requests(n int) string {
	if n == 1 {
		return "1 request"
	}
	return fmt.Sprintf("%d requests", n)
}

// serveURL returns the URL to open the dashboard at, with the port ln
// listens on: its host is that of addr as given, which serve answers to
// (a name stays a name: ln's address, the one it resolved to, is not
// answered to), or localhost when addr is every interface's (0.0.0.0 and
// :: are no host to ask for, nor answered to). An IPv6 zone is escaped
// (%25eth0), as a URL holds it.
func serveURL(addr string, ln net.Addr, base string) string {
	host, _, _ := net.SplitHostPort(addr)
	lnHost, port, _ := net.SplitHostPort(ln.String())
	switch {
	case everyInterface(host):
		host = "localhost"
	case hostname.EndsInNumber(host):
		if _, err := netip.ParseAddr(host); err != nil {
			host = lnHost // no address (127.1): not answered to (answeredHost)
		}
	}
	return (&url.URL{Scheme: "http", Host: net.JoinHostPort(host, port), Path: base}).String()
}

// newServer returns the HTTP server of the dashboard h configured by cfg.
func newServer(h http.Handler, cfg dashboard.Config) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		// A page writes its response once its database work is done,
		// which may take up to QueryTimeout.
		WriteTimeout: max(time.Minute, cfg.QueryTimeout+30*time.Second),
		IdleTimeout:  2 * time.Minute,
		// The dashboard's largest GET, the replay preview of a full page
		// of selected events, takes up to ~220 KB of query.
		MaxHeaderBytes: 512 << 10,
	}
}

// serveLogger logs the dashboard's mutations and failures on stderr.
func serveLogger(s *session) *slog.Logger {
	return slog.New(slog.NewTextHandler(s.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
}
