package dispatcher_test

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/internal/memstore"
	"github.com/outbox-go/outbox/registry"
)

// BenchmarkDeliver measures one delivery through the dispatcher (intake,
// tracker, listener, coalesced DONE write to an in-memory store), with and
// without InFlightTTL. Events go in rounds of 64, each round waited for.
func BenchmarkDeliver(b *testing.B) {
	for _, path := range []string{"hot", "cold"} {
		for _, ttl := range []time.Duration{0, time.Minute} {
			b.Run(path+"/ttl="+ttl.String(), func(b *testing.B) { benchDeliver(b, path == "hot", ttl) })
		}
	}
}

func benchDeliver(b *testing.B, hot bool, ttl time.Duration) {
	st := memstore.New(nil)
	reg := registry.New()
	var wg sync.WaitGroup
	reg.Register("B", core.ListenerFunc(func(context.Context, core.Envelope) error { wg.Done(); return nil }))
	d, err := dispatcher.New(st, reg, dispatcher.Config{Workers: 2, InFlightTTL: ttl, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	envs := make([]core.Envelope, b.N)
	for i := range envs {
		env, err := core.NewEvent("B").ID("b-" + strconv.Itoa(i)).PayloadJSONString(`{"n":1}`).Build()
		if err != nil {
			b.Fatal(err)
		}
		envs[i] = env
		if err := st.Insert(context.Background(), nil, env, d.HotLease(env)); err != nil {
			b.Fatal(err)
		}
	}
	if err := d.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	const round = 64
	for i := 0; i < b.N; i += round {
		n := min(round, b.N-i)
		wg.Add(n)
		for _, env := range envs[i : i+n] {
			var ok bool
			if hot {
				ok = d.EnqueueHot(env, d.HotLease(env))
			} else {
				ok = d.EnqueueCold(env, 0, d.ClaimLease(time.Now()).Until)
			}
			if !ok {
				b.Fatalf("enqueue %s refused", env.ID())
			}
		}
		wg.Wait()
	}
	b.StopTimer()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := d.Close(ctx); err != nil {
		b.Fatal(err)
	}
}
