package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dashboard"
	"github.com/outbox-go/outbox/inbox"
	"github.com/outbox-go/outbox/internal/hostname"
	"github.com/outbox-go/outbox/internal/ident"
	"github.com/outbox-go/outbox/jdbcstore"
)

// Defaults of serve.
const (
	defaultServeAddr = "127.0.0.1:8080"
	// serveShutdown bounds the graceful stop after an interrupt.
	serveShutdown = 5 * time.Second
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
					return usagef("%v", err)
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
// unless it is every interface's, the hosts of the trusted origins and
// the --allowed-host hosts; nil, any host, for --allowed-host '*'.
func allowedHosts(addr string, origins, extra []string) ([]string, error) {
	if slices.Contains(extra, "*") {
		if len(extra) > 1 {
			return nil, usagef("--allowed-host '*' answers to any host: do not give other hosts with it")
		}
		return nil, nil
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
		ip := net.ParseIP(host)
		switch {
		case ip == nil && hostname.EndsInNumber(host):
			// No address (256.0.0.1), and no name a browser sends: listening
			// on it fails, saying so.
		case ip == nil || !ip.IsUnspecified():
			add(host)
		}
	}
	for _, o := range origins {
		if u, err := url.Parse(o); err == nil {
			add(u.Hostname()) // "" for an invalid origin, which dashboard.New refuses
		}
	}
	for _, h := range extra {
		add(h)
	}
	return out, nil
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
// gracefully.
func serve(ctx context.Context, s *session, addr string, h http.Handler, cfg dashboard.Config) error {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	mode := "read-only"
	if cfg.AllowMutations {
		mode = "mutations enabled"
	}
	fmt.Fprintf(s.stdout, "serving the dashboard on http://%s%s (%s); interrupt to stop\n", ln.Addr(), cfg.BasePath, mode)
	if host, _, err := net.SplitHostPort(ln.Addr().String()); err == nil {
		if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
			fmt.Fprintf(s.stderr, "%s: warning: the dashboard authenticates nobody and listens on %s, not only on loopback\n", progName, host)
			if len(cfg.AllowedHosts) > 0 {
				fmt.Fprintf(s.stderr, "%s: it answers only to requests for %s: add the names it is reached by with --allowed-host\n",
					progName, strings.Join(cfg.AllowedHosts, ", "))
			}
		}
	}
	srv := newServer(h, cfg)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), serveShutdown)
	defer cancel()
	err = srv.Shutdown(sctx)
	if serr := <-done; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("serve: stopping: %w", err)
	}
	return nil
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
