package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dashboard"
	"github.com/outbox-go/outbox/jdbcstore"
)

// scenarioDashboard measures the web dashboard over a large table: page
// times, and end_to_end with and without concurrent page loads. It runs
// only when -scenarios names it (seeding takes a while).
const scenarioDashboard = "dashboard"

// Defaults of the dashboard scenario's flags.
const (
	defaultDashRows    = 1_000_000
	defaultDashLoads   = 200
	defaultDashLoaders = 20
	defaultDashPause   = time.Second
	// dashDeadEvery: one seeded row in this many is DEAD, the others DONE.
	dashDeadEvery = 100
	// dashTypes is how many event types the DEAD rows spread over.
	dashTypes = 20
	// seedRowsPerStatement and seedStatementsPerTx shape the bulk insert.
	seedRowsPerStatement = 500
	seedStatementsPerTx  = 20
)

// dashboardOptions are the flags of the dashboard scenario.
type dashboardOptions struct {
	rows    int           // rows seeded into the outbox table
	loads   int           // page loads per measured page
	loaders int           // goroutines loading pages during the loaded end_to_end
	pause   time.Duration // each loader's pause between two loads
}

// register defines the flags on fs.
func (d *dashboardOptions) register(fs *flag.FlagSet) {
	fs.IntVar(&d.rows, "dashboard-rows", defaultDashRows, "dashboard scenario: rows seeded into the outbox table (1% DEAD, the rest DONE)")
	fs.IntVar(&d.loads, "dashboard-loads", defaultDashLoads, "dashboard scenario: loads of each measured page")
	fs.IntVar(&d.loaders, "dashboard-loaders", defaultDashLoaders, "dashboard scenario: goroutines loading pages during the loaded end_to_end (operators)")
	fs.DurationVar(&d.pause, "dashboard-pause", defaultDashPause, "dashboard scenario: each loader's pause between two page loads (0: load as fast as possible)")
}

// validate checks the flags.
func (d *dashboardOptions) validate() error {
	switch {
	case d.rows < dashDeadEvery:
		return fmt.Errorf("-dashboard-rows must be at least %d", dashDeadEvery)
	case d.loads < 1:
		return errors.New("-dashboard-loads must be at least 1")
	case d.loaders < 1:
		return errors.New("-dashboard-loaders must be at least 1")
	case d.pause < 0:
		return errors.New("-dashboard-pause must not be negative")
	}
	return nil
}

// pageTiming is the load time of one dashboard page.
type pageTiming struct {
	Page  string   `json:"page"`
	Loads int      `json:"loads"`
	P50ms *float64 `json:"p50_ms"`
	P99ms *float64 `json:"p99_ms"`
	MaxMs *float64 `json:"max_ms"`
}

// dashboardResult is what the scenario adds to its line.
type dashboardResult struct {
	Rows        int          `json:"rows"`
	SeedS       *float64     `json:"seed_s"`
	Pages       []pageTiming `json:"pages"`
	QuietPerS   []float64    `json:"quiet_events_per_s"`
	LoadedPerS  []float64    `json:"loaded_events_per_s"`
	LoadedRatio *float64     `json:"loaded_ratio"` // median loaded / median quiet
	PageLoadsS  *float64     `json:"page_loads_per_s"`
}

// runDashboard seeds -dashboard-rows rows by bulk SQL, times each page
// -dashboard-loads times (overview_fresh reads its figures on every load,
// StatsMaxAge < 0; overview_cached is the default configuration), then runs -rounds pairs of end_to_end phases of N events on the
// same table, one quiet and one with -dashboard-loaders goroutines
// loading pages (the dashboard's default figure cache) as fast as they
// can. The line's events_per_s is the median loaded rate, ratio the
// median loaded rate / the median quiet rate. Rates count events handed
// to the listener (a DONE count on a table of a million rows would load
// the database itself).
func (b *bench) runDashboard(ctx context.Context) (result, error) {
	var seen atomic.Int64
	h, err := b.start(ctx, outboxSetup{listen: func(context.Context, outbox.Envelope) error {
		seen.Add(1)
		return nil
	}})
	if err != nil {
		return result{}, err
	}
	defer h.close()
	st, err := jdbcstore.New(h.f.db, jdbcstore.Config{Logger: b.log})
	if err != nil {
		return result{}, err
	}
	d := b.opts.dash
	out := dashboardResult{Rows: d.rows}
	seedStart := time.Now()
	sample, err := seedRows(ctx, h.f.db, st, d.rows, time.Now())
	if err != nil {
		return result{}, fmt.Errorf("seed: %w", err)
	}
	if err := analyze(ctx, h.f.db, h.f.kind, st.Table()); err != nil {
		return result{}, err
	}
	out.SeedS = round(time.Since(seedStart).Seconds(), 1)

	fresh, err := dashServer(st, -1)
	if err != nil {
		return result{}, err
	}
	defer fresh.Close()
	pages := []struct{ name, path, want string }{
		{"overview_fresh", "/", `id="count-DEAD"`},
		{"dead", "/dead", `id="dead-list"`},
		{"dead_by_type", "/dead?type=" + dashType(7), `id="dead-list"`},
		{"dead_deep_page", "/dead?after=" + sample.midDeadID, `id="dead-list"`},
		{"event", "/event?id=" + sample.deadID, `id="event"`},
	}
	for _, p := range pages {
		t, err := timePage(ctx, fresh.URL+p.path, p.want, d.loads)
		if err != nil {
			return result{}, fmt.Errorf("page %s: %w", p.name, err)
		}
		t.Page = p.name
		out.Pages = append(out.Pages, t)
	}

	cached, err := dashServer(st, 0)
	if err != nil {
		return result{}, err
	}
	defer cached.Close()
	// The overview as served by default: the first load reads the
	// figures, the others get them at once (refreshed in the background
	// past StatsMaxAge).
	t, err := timePage(ctx, cached.URL+"/", `id="count-DEAD"`, d.loads)
	if err != nil {
		return result{}, fmt.Errorf("page overview_cached: %w", err)
	}
	t.Page = "overview_cached"
	out.Pages = append(out.Pages, t)
	var loads atomic.Int64
	var loadedTime time.Duration
	phase := func(round int, loaded bool) (float64, error) {
		var wg sync.WaitGroup
		stop := make(chan struct{})
		var loadErr atomic.Pointer[error]
		if loaded {
			for g := range d.loaders {
				wg.Go(func() {
					paths := []string{"/", "/dead", "/dead?type=" + dashType(g), "/event?id=" + sample.deadID}
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						if err := getPage(ctx, cached.URL+paths[i%len(paths)]); err != nil {
							loadErr.CompareAndSwap(nil, &err)
							return
						}
						loads.Add(1)
						if d.pause > 0 {
							select {
							case <-stop:
								return
							case <-time.After(d.pause):
							}
						}
					}
				})
			}
		}
		base := seen.Load()
		n := b.opts.n
		start := time.Now()
		_, err := runPool(ctx, b.opts.workers, n, func(ctx context.Context, i int) error {
			return h.publish(ctx, eventType, orderRef(fmt.Sprintf("dash%d%v", round, loaded), i), orderAmount(i), -1)
		})
		if err == nil {
			var ok bool
			ok, err = h.waitCount(ctx, &seen, base+int64(n))
			if err == nil && !ok {
				err = fmt.Errorf("timed out: %d of %d events delivered", seen.Load()-base, n)
			}
		}
		took := time.Since(start)
		close(stop)
		wg.Wait()
		if e := loadErr.Load(); e != nil && err == nil {
			err = fmt.Errorf("page load: %w", *e)
		}
		if loaded {
			loadedTime += took
		}
		return rate(n, took), err
	}
	for r := range b.opts.rounds {
		q, err := phase(r, false)
		if err != nil {
			return result{}, fmt.Errorf("quiet end_to_end: %w", err)
		}
		l, err := phase(r, true)
		if err != nil {
			return result{}, fmt.Errorf("loaded end_to_end: %w", err)
		}
		out.QuietPerS = append(out.QuietPerS, *round(q, 1))
		out.LoadedPerS = append(out.LoadedPerS, *round(l, 1))
	}
	quiet, loaded := median(out.QuietPerS), median(out.LoadedPerS)
	out.LoadedRatio = round(loaded/quiet, 3)
	out.PageLoadsS = round(float64(loads.Load())/loadedTime.Seconds(), 1)

	res := b.newResult(scenarioDashboard, b.opts.n)
	res.EventsPerS = round(loaded, 1)
	res.RatioToFloor = nil
	res.Dashboard = &out
	res.Notes = append(res.Notes, fmt.Sprintf("rows=%d", d.rows), fmt.Sprintf("seed_s=%.1f", *out.SeedS))
	for _, p := range out.Pages {
		res.Notes = append(res.Notes, fmt.Sprintf("%s_p50/p99_ms=%.1f/%.1f", p.Page, *p.P50ms, *p.P99ms))
	}
	res.Notes = append(res.Notes, fmt.Sprintf("quiet/s=%.0f", quiet), fmt.Sprintf("loaded/s=%.0f", loaded),
		fmt.Sprintf("loaded_ratio=%.3f", *out.LoadedRatio), fmt.Sprintf("page_loads/s=%.0f", *out.PageLoadsS),
		fmt.Sprintf("loaders=%d", d.loaders), fmt.Sprintf("pause=%s", d.pause))
	return res, nil
}

func dashType(i int) string { return fmt.Sprintf("DashType%02d", i%dashTypes) }

// dashServer serves the dashboard over st, read-only, with the given
// StatsMaxAge (0: the default cache).
func dashServer(st *jdbcstore.Store, maxAge time.Duration) (*httptest.Server, error) {
	h, err := dashboard.New(dashboard.Config{Store: st, StatsMaxAge: maxAge})
	if err != nil {
		return nil, err
	}
	return httptest.NewServer(h), nil
}

// timePage loads url n times in a row and returns the load times. Every
// load must answer 200 with want in the page.
func timePage(ctx context.Context, url, want string, n int) (pageTiming, error) {
	times := make([]time.Duration, 0, n)
	for range n {
		start := time.Now()
		body, err := fetch(ctx, url)
		if err != nil {
			return pageTiming{}, err
		}
		times = append(times, time.Since(start))
		if !strings.Contains(body, want) {
			return pageTiming{}, fmt.Errorf("the page lacks %s", want)
		}
	}
	slices.Sort(times)
	ms := func(d time.Duration) *float64 { return round(float64(d)/float64(time.Millisecond), 2) }
	return pageTiming{Loads: n, P50ms: ms(percentile(times, 50)), P99ms: ms(percentile(times, 99)), MaxMs: ms(times[len(times)-1])}, nil
}

// getPage loads url, discarding the page.
func getPage(ctx context.Context, url string) error {
	_, err := fetch(ctx, url)
	return err
}

// fetch GETs url and returns the body; a status other than 200 is an error.
func fetch(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return "", err
	}
	if res.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, res.Status)
	}
	return string(b), nil
}

// seeded names rows the page loads ask for.
type seeded struct {
	deadID, midDeadID string
}

// seedRows bulk-inserts n finished rows into st's table: one in
// dashDeadEvery DEAD (spread over dashTypes types and five tenants, with
// a last error), the others DONE, finished over the 48 hours before now,
// in multi-row INSERTs of seedRowsPerStatement rows, seedStatementsPerTx
// statements per transaction. No row is pending, so the outbox has
// nothing to deliver from them.
func seedRows(ctx context.Context, db *sqlx.DB, st *jdbcstore.Store, n int, now time.Time) (seeded, error) {
	d := st.Dialect()
	payload, err := d.EncodePayload(core.PayloadJSON, []byte(`{"seeded":true}`))
	if err != nil {
		return seeded{}, err
	}
	const cols = "(event_id, event_type, tenant_id, occurred_at, payload, payload_kind, status, attempts, available_at, created_at, done_at, last_error)"
	row := "(?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?)"
	stmt := func(rows int) string {
		return db.Rebind("INSERT INTO " + d.QuoteIdent(st.Table()) + " " + cols + " VALUES " +
			strings.TrimSuffix(strings.Repeat(row+", ", rows), ", "))
	}
	full := stmt(seedRowsPerStatement)
	var s seeded
	const window = 48 * time.Hour
	args := make([]any, 0, seedRowsPerStatement*11)
	for i := 0; i < n; {
		tx, err := db.BeginTxx(ctx, nil)
		if err != nil {
			return s, err
		}
		for k := 0; k < seedStatementsPerTx && i < n; k++ {
			rows := min(seedRowsPerStatement, n-i)
			args = args[:0]
			for j := range rows {
				idx := i + j
				id := fmt.Sprintf("seed-%010d", idx)
				done := now.Add(-time.Duration(idx%int(window/time.Second)) * time.Second)
				created := done.Add(-time.Second)
				status, attempts, typ, tenant, lastErr := int(core.StatusDone), 1, "SeededDone", any(nil), any(nil)
				if idx%dashDeadEvery == 0 {
					dead := idx / dashDeadEvery
					status, attempts, typ = int(core.StatusDead), 5, dashType(dead)
					tenant, lastErr = fmt.Sprintf("tenant-%d", dead%5), "seeded failure: upstream answered 503"
					if s.deadID == "" {
						s.deadID = id
					}
					if dead == n/dashDeadEvery/2 {
						s.midDeadID = id
					}
				}
				args = append(args, id, typ, tenant, d.EncodeTime(created), payload, status, attempts,
					d.EncodeTime(created), d.EncodeTime(created), d.EncodeTime(done), lastErr)
			}
			q := full
			if rows != seedRowsPerStatement {
				q = stmt(rows)
			}
			if _, err := tx.ExecContext(ctx, q, args...); err != nil {
				return s, errors.Join(err, tx.Rollback())
			}
			i += rows
		}
		if err := tx.Commit(); err != nil {
			return s, err
		}
	}
	if s.midDeadID == "" {
		s.midDeadID = s.deadID
	}
	return s, nil
}

// analyze refreshes the planner statistics after the bulk load, as
// autovacuum (PostgreSQL) or InnoDB's statistics sampling (MySQL) would
// do on a table that grew to this size. SQLite has no statistics unless
// the application runs ANALYZE, which few do: it is left as it is.
func analyze(ctx context.Context, db *sqlx.DB, kind, table string) error {
	var q string
	switch kind {
	case "mysql":
		q = "ANALYZE TABLE " + table
	case "postgres":
		q = "ANALYZE " + table
	default:
		return nil
	}
	if _, err := db.ExecContext(ctx, q); err != nil {
		return fmt.Errorf("analyze: %w", err)
	}
	return nil
}
