package natsjs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/internal/relaytest"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/relay"
	"github.com/outbox-go/outbox/relay/natsjs"
	"github.com/outbox-go/outbox/retry"
)

// relayHeaders relays env through an outbox (an attempt or two, so an
// event the relay cannot send goes DEAD fast) to a stream of its own and
// returns the messages a consumer of the stream receives, in the order of
// envs, each with the headers the event should arrive with: relay.Headers of the stored event
// and the Nats-Msg-Id of its id.
func relayHeaders(t *testing.T, cfg natsjs.Config, envs ...core.Envelope) ([]jetstream.Msg, []map[string]string) {
	t.Helper()
	_, js := connect(t)
	st, prefix := newStream(t, js, nil)
	cfg.Subject = prefix + ".{type}"
	r, err := natsjs.New(js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ob := relaytest.Outbox(t, outbox.Config{Dispatcher: dispatcher.Config{
		Workers: 4, MaxAttempts: 2, Retry: retry.Exponential{BaseDelay: 10 * time.Millisecond, MaxDelay: 20 * time.Millisecond}}}, r)
	for _, env := range envs {
		relaytest.Publish(t, ob, env)
	}
	testsupport.WaitFor(t, 30*time.Second, "every event DONE or DEAD", func() bool {
		c := relaytest.Counts(t, ob)
		return c[core.StatusDone]+c[core.StatusDead] == len(envs)
	})
	want := make([]map[string]string, len(envs))
	for i, env := range envs {
		rec, err := ob.Get(context.Background(), env.ID())
		if err != nil {
			t.Fatal(err)
		}
		if rec.Status != core.StatusDone || rec.Attempts != 0 {
			t.Errorf("event %d (%s): %v after %d failed attempts, want DONE at the first: %s", i, env.ID(), rec.Status, rec.Attempts, rec.LastError)
		}
		stored, err := rec.Envelope()
		if err != nil {
			t.Fatal(err)
		}
		want[i] = map[string]string{jetstream.MsgIDHeader: natsjs.MsgID(env.ID())}
		relay.Headers(stored, func(k, v string) { want[i][k] = v })
	}
	if t.Failed() {
		t.FailNow()
	}
	// The workers deliver concurrently: put the messages in envs' order.
	msgs := make([]jetstream.Msg, len(envs))
	for _, m := range consume(t, st, len(envs)) {
		id := m.Headers().Get(jetstream.MsgIDHeader)
		i := slices.IndexFunc(envs, func(env core.Envelope) bool { return natsjs.MsgID(env.ID()) == id })
		if i < 0 || msgs[i] != nil {
			t.Fatalf("unexpected or repeated Nats-Msg-Id %q", id)
		}
		msgs[i] = m
	}
	return msgs, want
}

// consume reads n messages from st through a consumer, in stream order.
func consume(t *testing.T, st jetstream.Stream, n int) []jetstream.Msg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatalf("consumer: %v", err)
	}
	batch, err := cons.Fetch(n, jetstream.FetchMaxWait(10*time.Second))
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	var msgs []jetstream.Msg
	for m := range batch.Messages() {
		msgs = append(msgs, m)
	}
	if err := batch.Error(); err != nil {
		t.Fatalf("fetch: %v", err)
	}
	if len(msgs) != n {
		t.Fatalf("the consumer received %d messages, want %d", len(msgs), n)
	}
	return msgs
}

// single returns h as one value per name, failing on a name with more.
func single(t *testing.T, h nats.Header) map[string]string {
	t.Helper()
	out := make(map[string]string, len(h))
	for k, vs := range h {
		if len(vs) != 1 {
			t.Errorf("header %q has %d values %q, want one", k, len(vs), vs)
		}
		out[k] = vs[0]
	}
	return out
}

// hdrEvent builds an event of type Hdr with a traceparent, which NATS
// carries verbatim, and what mod adds.
func hdrEvent(t *testing.T, mod func(*core.Builder) *core.Builder) core.Envelope {
	t.Helper()
	env, err := mod(core.NewEvent("Hdr").Header("traceparent", traceparent).PayloadJSONString(`{}`)).Build()
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// Header names NATS refuses (nats.go would not send the message: the
// event went DEAD) reach a consumer exactly through DecodeHeaders: a
// space, a colon, non-ASCII letters, and the relay's own HeaderEncoded.
func TestRelayHeaderNamesNATSRefusesRoundTrip(t *testing.T) {
	hdr := func(k, v string) core.Envelope {
		return hdrEvent(t, func(b *core.Builder) *core.Builder { return b.Header(k, v) })
	}
	roundTrip(t, natsjs.Config{},
		hdr("my key", "space in the name"),
		hdr("a:b", "colon in the name"),
		hdr("Schlüssel", "non-ASCII name"),
		hdr("ключ 😀", "value 😀 beyond the BMP\r\n"),
		hdr("(),/;<=>?@[\\]{}\"", "forbidden name characters"),
		hdrEvent(t, func(b *core.Builder) *core.Builder {
			return b.Header(natsjs.HeaderEncoded, "an event header of the relay's name").Header("x y", "z")
		}),
		hdr(natsjs.HeaderEncoded, "alone"),
	)
}

// Header values NATS would change (CR and LF into spaces, spaces and tabs
// at either end trimmed) reach a consumer exactly through DecodeHeaders:
// the event's own headers and the metadata headers (aggregate type and
// id, tenant, order key).
func TestRelayHeaderValuesNATSChangesRoundTrip(t *testing.T) {
	hdr := func(k, v string) core.Envelope {
		return hdrEvent(t, func(b *core.Builder) *core.Builder { return b.Header(k, v) })
	}
	roundTrip(t, natsjs.Config{},
		hdr("multi-line", "line1\r\nline2"),
		hdr("lf", "line1\nline2"),
		hdr("cr", "line1\rline2"),
		hdr("lf-only", "\n"),
		hdr("padded", "  both ends  "),
		hdrEvent(t, func(b *core.Builder) *core.Builder { return b.Header("tabs", "\tlead").Header("trail", "trail\t") }),
		hdrEvent(t, func(b *core.Builder) *core.Builder { return b.AggregateType("T").AggregateID("agg\nid") }),
		hdrEvent(t, func(b *core.Builder) *core.Builder { return b.AggregateType("T").AggregateID(" padded-agg ") }),
		hdrEvent(t, func(b *core.Builder) *core.Builder {
			return b.AggregateType(" T\r\n").AggregateID("1").TenantID("acme ").OrderKey("key\n1")
		}),
	)
}

// roundTrip relays envs, each with a header NATS cannot carry verbatim,
// and checks what a consumer receives: every event DONE at its first
// attempt, DecodeHeaders giving back every header exactly, each header
// either a NATS header of its own, unchanged, or inside HeaderEncoded
// alone, whose value is printable ASCII.
func roundTrip(t *testing.T, cfg natsjs.Config, envs ...core.Envelope) {
	t.Helper()
	msgs, want := relayHeaders(t, cfg, envs...)
	for i, m := range msgs {
		got, err := natsjs.DecodeHeaders(m.Headers())
		if err != nil {
			t.Errorf("event %d: DecodeHeaders: %v", i, err)
			continue
		}
		if g := single(t, got); !maps.Equal(g, want[i]) {
			t.Errorf("event %d: decoded headers\n%q\nwant\n%q", i, g, want[i])
		}
		enc := m.Headers().Values(natsjs.HeaderEncoded)
		if len(enc) != 1 {
			t.Errorf("event %d: %s values %q, want one", i, natsjs.HeaderEncoded, enc)
			continue
		}
		if strings.ContainsFunc(enc[0], func(r rune) bool { return r < 0x20 || r > 0x7e }) {
			t.Errorf("event %d: %s = %q, not printable ASCII", i, natsjs.HeaderEncoded, enc[0])
		}
		// A header is either a NATS header of its own, exactly, or
		// inside HeaderEncoded alone.
		var inside map[string]string
		if err := json.Unmarshal([]byte(enc[0]), &inside); err != nil {
			t.Errorf("event %d: %s = %q: %v", i, natsjs.HeaderEncoded, enc[0], err)
		}
		for k, v := range want[i] {
			plain, isPlain := m.Headers()[k]
			if k == natsjs.HeaderEncoded {
				isPlain = false // the relay's own, an event's goes inside
			}
			enc, isEnc := inside[k]
			switch {
			case isPlain == isEnc:
				t.Errorf("event %d: header %q: a NATS header %v, in %s %v; want exactly one", i, k, isPlain, natsjs.HeaderEncoded, isEnc)
			case isPlain && (len(plain) != 1 || plain[0] != v):
				t.Errorf("event %d: NATS header %q = %q, want %q", i, k, plain, v)
			case isEnc && enc != v:
				t.Errorf("event %d: header %q in %s = %q, want %q", i, k, natsjs.HeaderEncoded, enc, v)
			}
		}
	}
	// The headers NATS carries verbatim stay NATS headers of their own.
	for i, m := range msgs {
		for _, k := range []string{"traceparent", relay.HeaderEventID, relay.HeaderEventType, relay.HeaderContentType} {
			if got := m.Headers().Get(k); got != want[i][k] {
				t.Errorf("event %d: NATS header %s = %q, want %q", i, k, got, want[i][k])
			}
		}
	}
}

// Headers NATS carries verbatim go as before: each a NATS header of its
// own, unchanged, no HeaderEncoded, and DecodeHeaders gives them back as
// they came. Text NATS carries unchanged stays plain too: non-ASCII and
// control characters inside a value, an empty value, inner spaces.
func TestRelayPlainHeadersUnchanged(t *testing.T) {
	env, err := core.NewEvent("Plain").AggregateType("Order").AggregateID("order 42").TenantID("Zürich").
		OrderKey("k-1").Header("traceparent", traceparent).Header("tracestate", "congo=t61rcWkgMzE").
		Header("X-Note", "grüße, 日本 \x01\x7f\ttab").Header("Empty", "").Header("a!#$%&'*+-.^_`|~z", "all the name characters").
		PayloadJSONString(`{"n":1}`).Build()
	if err != nil {
		t.Fatal(err)
	}
	msgs, want := relayHeaders(t, natsjs.Config{}, env)
	h := msgs[0].Headers()
	if g := single(t, h); !maps.Equal(g, want[0]) {
		t.Errorf("NATS headers\n%q\nwant\n%q", g, want[0])
	}
	if _, ok := h[natsjs.HeaderEncoded]; ok {
		t.Errorf("%s on a message whose headers all travel verbatim: %q", natsjs.HeaderEncoded, h[natsjs.HeaderEncoded])
	}
	got, err := natsjs.DecodeHeaders(h)
	if err != nil {
		t.Fatal(err)
	}
	if g := single(t, got); !maps.Equal(g, want[0]) {
		t.Errorf("decoded headers\n%q\nwant\n%q", g, want[0])
	}
}

// The relay's metadata headers win: an event header (or a Propagator's)
// named like one of them, in any case, is dropped, so a consumer always
// reads the event's own id, type and fields (an event id copied into the
// headers of two events would make the inbox drop the second as a
// duplicate). Content-Type is the relay's for a JSON payload only: a bytes
// event's own Content-Type travels.
func TestRelayMetadataHeadersWin(t *testing.T) {
	envs, want := relaytest.SpoofedEvents(t, "agg\nid")
	msgs, _ := relayHeaders(t, natsjs.Config{Propagator: relaytest.SpoofInjector{}}, envs...)
	for i := range envs {
		got, err := natsjs.DecodeHeaders(msgs[i].Headers())
		if err != nil {
			t.Fatal(err)
		}
		relaytest.CheckMetadataHeaders(t, envs[i].ID(), single(t, got), want[i])
	}
}

// badInjector writes a header NATS cannot carry verbatim, and one that is
// not valid UTF-8 either when bad is set.
type badInjector struct{ bad bool }

func (p badInjector) InjectHeaders(_ context.Context, set func(key, value string)) {
	set("baggage", "k=v\r\n")
	if p.bad {
		set("x-bytes", "\xff\n")
	}
}

// A Propagator's header NATS cannot carry verbatim travels encoded as
// well. One that is not valid UTF-8 besides cannot be written exactly:
// the event fails (a normal failure, not an outage) and nothing is sent.
func TestRelayPropagatorHeaderEncoded(t *testing.T) {
	env, err := core.NewEvent("Traced").PayloadJSONString(`{}`).Build()
	if err != nil {
		t.Fatal(err)
	}
	msgs, _ := relayHeaders(t, natsjs.Config{Propagator: badInjector{}}, env)
	got, err := natsjs.DecodeHeaders(msgs[0].Headers())
	if err != nil {
		t.Fatal(err)
	}
	if v := got.Get("baggage"); v != "k=v\r\n" {
		t.Errorf("baggage = %q, want %q", v, "k=v\r\n")
	}

	_, js := connect(t)
	st, prefix := newStream(t, js, nil)
	r, err := natsjs.New(js, natsjs.Config{Subject: prefix + ".{type}", Propagator: badInjector{bad: true}})
	if err != nil {
		t.Fatal(err)
	}
	err = r.OnEvent(context.Background(), env)
	if err == nil || errors.Is(err, core.ErrUnavailable) || !strings.Contains(err.Error(), `"x-bytes"`) {
		t.Errorf("a header neither verbatim nor UTF-8: %v, want a normal failure naming it", err)
	}
	if n := streamCount(t, st); n != 0 {
		t.Errorf("%d messages stored, want none", n)
	}
}

// DecodeHeaders copies h, leaving it as it was; a HeaderEncoded it cannot
// read is ErrEncodedHeaders.
func TestDecodeHeaders(t *testing.T) {
	h := nats.Header{"A": {"1", "2"}, natsjs.HeaderEncoded: {`{"my key":"v\r\n","A":"3"}`}}
	got, err := natsjs.DecodeHeaders(h)
	if err != nil {
		t.Fatal(err)
	}
	want := nats.Header{"A": {"3"}, "my key": {"v\r\n"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("DecodeHeaders = %q, want %q", got, want)
	}
	if len(h) != 2 || len(h["A"]) != 2 || h.Get(natsjs.HeaderEncoded) == "" {
		t.Errorf("DecodeHeaders changed its argument: %q", h)
	}

	plain := nats.Header{"A": {"1"}}
	got, err = natsjs.DecodeHeaders(plain)
	if err != nil {
		t.Fatal(err)
	}
	got["A"][0] = "changed"
	if plain.Get("A") != "1" {
		t.Errorf("the copy of a header without %s shares its values", natsjs.HeaderEncoded)
	}

	for _, bad := range [][]string{{`{"a":1}`}, {`null`}, {`[]`}, {`{"a":"b"`}, {`{}`, `{}`}} {
		got, err := natsjs.DecodeHeaders(nats.Header{natsjs.HeaderEncoded: bad})
		if !errors.Is(err, natsjs.ErrEncodedHeaders) || got != nil {
			t.Errorf("DecodeHeaders(%s %q) = %q, %v; want ErrEncodedHeaders", natsjs.HeaderEncoded, bad, got, err)
		}
	}
}

// The relay's rule of which headers travel verbatim is nats.go's: every
// byte as a name character, and inside, at the start and at the end of a
// value, sent through the server to a subscriber. A header the rule calls
// verbatim arrives exactly; any other one does not (nats.go refuses the
// message or changes the value). The relay's own HeaderEncoded is the one
// exception: NATS carries it, but an event's is encoded so it does not
// clash.
func TestVerbatimIsNATSRule(t *testing.T) {
	nc, _ := connect(t)
	subject := "natsjs-test-verbatim-" + uniq()
	sub, err := nc.SubscribeSync(subject)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()

	type header struct{ name, value string }
	var hs []header
	for c := range 256 {
		b := string([]byte{byte(c)})
		hs = append(hs, header{"a" + b + "z", "v"}, header{b, "v"},
			header{"K", "a" + b + "z"}, header{"K", b + "z"}, header{"K", "a" + b})
	}
	hs = append(hs, header{"K", ""}, header{"K", "grüße 😀"}, header{"Schlüssel", "v"}, header{"", "v"})
	for _, h := range hs {
		exact := func() bool {
			m := nats.NewMsg(subject)
			m.Header.Set(h.name, h.value)
			if err := nc.PublishMsg(m); err != nil {
				if !errors.Is(err, nats.ErrBadHeaderMsg) {
					t.Fatalf("publish %q: %q: %v", h.name, h.value, err)
				}
				return false
			}
			got, err := sub.NextMsg(5 * time.Second)
			if err != nil {
				t.Fatalf("receive %q: %q: %v", h.name, h.value, err)
			}
			v, ok := got.Header[h.name]
			return ok && len(got.Header) == 1 && len(v) == 1 && v[0] == h.value
		}()
		if v := natsjs.Verbatim(h.name, h.value); v != exact {
			t.Errorf("header %q: %q: verbatim %v, but NATS carries it exactly: %v", h.name, h.value, v, exact)
		}
	}
	if natsjs.Verbatim(natsjs.HeaderEncoded, "v") {
		t.Errorf("an event header named %s would travel verbatim and clash with the relay's", natsjs.HeaderEncoded)
	}
}

// nats-server finds JetStream's control headers by searching the text of
// the whole header block, so a header that mentions one (in its value or
// its name) could be taken for it: on nats-server 2.9 a value holding
// "Nats-Msg-Id: x" turned off the message's duplicate detection, and
// "Nats-Expected-Last-Sequence: 999" or "Nats-Rollup: all" made the server
// refuse it. Such headers travel inside HeaderEncoded, where no "nats-"
// is left as text, and reach a consumer exactly.
func TestRelayHeadersMentioningNATSControlHeaders(t *testing.T) {
	hdr := func(k, v string) core.Envelope {
		return hdrEvent(t, func(b *core.Builder) *core.Builder { return b.Header(k, v) })
	}
	envs := []core.Envelope{
		hdr("X-Decoy", "Nats-Msg-Id: decoy"),
		hdr("Y", "Nats-Expected-Last-Sequence: 999"),
		hdr("lower", "nats-expected-last-sequence:999"),
		hdr("X-Nats-Msg-Id", "a name that mentions it"),
		hdrEvent(t, func(b *core.Builder) *core.Builder { return b.AggregateType("T").AggregateID("Nats-Rollup:all") }),
		hdrEvent(t, func(b *core.Builder) *core.Builder {
			return b.Header("Z", "Nats-Expected-Stream: nope").Header("key ü", "Nats-Msg-Id:inside the encoded one")
		}),
	}
	roundTrip(t, natsjs.Config{}, envs...)

	// No header text but the relay's Nats-Msg-Id mentions "nats-", and
	// duplicate detection holds for such an event.
	_, js := connect(t)
	st, prefix := newStream(t, js, nil)
	r, err := natsjs.New(js, natsjs.Config{Subject: prefix + ".{type}"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	for _, env := range envs {
		for range 2 {
			if err := r.OnEvent(context.Background(), env); err != nil {
				t.Fatalf("OnEvent: %v", err)
			}
		}
	}
	for i, m := range consume(t, st, len(envs)) {
		for k, vs := range m.Headers() {
			for _, v := range vs {
				if k != jetstream.MsgIDHeader && (strings.Contains(strings.ToLower(k), "nats-") || strings.Contains(strings.ToLower(v), "nats-")) {
					t.Errorf("message %d: header %q: %q mentions nats-", i, k, v)
				}
			}
		}
	}
	info, err := st.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != uint64(len(envs)) {
		t.Errorf("the stream holds %d messages after each event was relayed twice, want %d: duplicate detection failed", info.State.Msgs, len(envs))
	}
}

// A message with an empty payload and a Status header is what nats.go's
// JetStream consumers take for a server status (404: no messages; 100: a
// heartbeat), so they never hand it over: with an empty payload the
// headers Status and Description (in any case) travel inside
// HeaderEncoded, and the consumer receives the event with them exactly.
func TestRelayStatusHeaderOfAnEmptyPayloadRoundTrip(t *testing.T) {
	empty := func(kv ...string) core.Envelope {
		b := core.NewEvent("Hdr").Header("traceparent", traceparent).PayloadBytes([]byte{})
		for i := 0; i < len(kv); i += 2 {
			b.Header(kv[i], kv[i+1])
		}
		env, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		return env
	}
	roundTrip(t, natsjs.Config{},
		empty("Status", "404"),
		empty("Status", "100"),
		empty("status", "408", "Description", "Request Timeout"),
	)
	// With a payload they are ordinary headers and travel verbatim.
	msgs, want := relayHeaders(t, natsjs.Config{},
		hdrEvent(t, func(b *core.Builder) *core.Builder { return b.Header("Status", "404").Header("Description", "d") }))
	if got := single(t, msgs[0].Headers()); !maps.Equal(got, want[0]) {
		t.Errorf("headers\n%q\nwant\n%q", got, want[0])
	}
}
