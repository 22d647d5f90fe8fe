package jdbcstore_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/testdb"
	"github.com/outbox-go/outbox/jdbcstore"
	pgdialect "github.com/outbox-go/outbox/jdbcstore/postgres"
)

// pgCommit is the simple-protocol message pgx sends to commit a
// transaction: 'Q', its length, "commit" and a NUL.
var pgCommit = []byte("Q\x00\x00\x00\x0bcommit\x00")

// commitCutProxy forwards TCP connections to a PostgreSQL server. Once
// armed, the first connection that sends a COMMIT gets no answer to it:
// the server commits, the answer is dropped, and onCommitted runs (the
// test then ends the client's context), so the client sees its context's
// error for a transaction that was committed, as when --timeout ends
// while the answer to the COMMIT is on its way.
type commitCutProxy struct {
	ln          net.Listener
	upstream    string
	armed       atomic.Bool
	onCommitted func()
	wg          sync.WaitGroup
}

func startCommitCutProxy(t *testing.T, upstream string) *commitCutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &commitCutProxy{ln: ln, upstream: upstream}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				p.forward(c)
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		p.wg.Wait()
	})
	return p
}

// forward pipes c to the upstream server and back.
func (p *commitCutProxy) forward(c net.Conn) {
	defer c.Close()
	s, err := net.Dial("tcp", p.upstream)
	if err != nil {
		return
	}
	defer s.Close()
	var held atomic.Bool // this connection's COMMIT is held
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		// Server to client; after a held COMMIT, the answers are read
		// and dropped.
		buf := make([]byte, 64<<10)
		fired := false
		for {
			n, err := s.Read(buf)
			if n > 0 && held.Load() {
				if !fired {
					fired = true
					p.onCommitted()
				}
			} else if n > 0 {
				if _, werr := c.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		_ = c.Close()
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if bytes.Contains(buf[:n], pgCommit) && p.armed.CompareAndSwap(true, false) {
				held.Store(true)
			}
			if _, werr := s.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// commitCutStores returns a store on a new PostgreSQL schema holding the
// DEAD events ids, and a store on the same table whose connections go
// through a commitCutProxy.
func commitCutStores(t *testing.T, ids ...string) (direct, cut *jdbcstore.Store, p *commitCutProxy) {
	t.Helper()
	dsn := testdb.PostgresSchemaDSN(t)
	direct, _ = storeWithSchema(t, testdb.OpenPostgres(t, dsn), pgdialect.Dialect)
	deadEvents(t, direct, ids...)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	p = startCommitCutProxy(t, u.Host)
	u.Host = p.ln.Addr().String()
	db, err := sqlx.Open("pgx", u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	cut, err = jdbcstore.New(db, jdbcstore.Config{Dialect: pgdialect.Dialect})
	if err != nil {
		t.Fatal(err)
	}
	return direct, cut, p
}

// statuses returns the status of each of ids in st's table ("gone" for a
// row that is not there).
func statuses(t *testing.T, st *jdbcstore.Store, ids ...string) []string {
	t.Helper()
	got, err := st.Statuses(t.Context(), ids)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = "gone"
		if s, ok := got[id]; ok {
			out[i] = s.String()
		}
	}
	return out
}

// A replay or a discard whose context ends while the answer to a batch's
// COMMIT is on its way (PostgreSQL commits it all the same) counts that
// batch: the result says what the table says.
func TestDeadOpsCountABatchCommittedAsItsContextEnded(t *testing.T) {
	for _, c := range []struct {
		name  string
		ids   []string
		first string // the first batch's row after the cut
		run   func(ctx context.Context, st *jdbcstore.Store) (n int, ids []string, missed int, err error)
	}{
		{"replay", []string{"r1", "r2", "r3"}, core.StatusNew.String(), func(ctx context.Context, st *jdbcstore.Store) (int, []string, int, error) {
			res, err := st.ReplayDead(ctx, jdbcstore.DeadFilter{EventType: "T"}, jdbcstore.ReplayOptions{BatchSize: 1})
			return res.Replayed, res.IDs, len(res.NotReplayed), err
		}},
		{"discard", []string{"d1", "d2", "d3"}, "gone", func(ctx context.Context, st *jdbcstore.Store) (int, []string, int, error) {
			res, err := st.DiscardDead(ctx, jdbcstore.DeadFilter{EventType: "T"}, jdbcstore.DiscardOptions{BatchSize: 1})
			return res.Discarded, res.IDs, len(res.NotDiscarded), err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			direct, cut, p := commitCutStores(t, c.ids...)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			p.onCommitted = cancel
			p.armed.Store(true)
			n, ids, missed, err := c.run(ctx, cut)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v, want the context's end", err)
			}
			got := statuses(t, direct, c.ids...)
			if want := []string{c.first, core.StatusDead.String(), core.StatusDead.String()}; !slices.Equal(got, want) {
				t.Fatalf("statuses after the cut = %v, want %v (the first batch committed)", got, want)
			}
			if n != 1 || !slices.Equal(ids, c.ids[:1]) || missed != 0 {
				t.Errorf("counted %d, ids %v, %d not done; want the committed batch counted: 1, %v", n, ids, missed, c.ids[:1])
			}
		})
	}
}
