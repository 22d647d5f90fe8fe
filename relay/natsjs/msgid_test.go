package natsjs_test

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

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

// encodedMsgID is the Nats-Msg-Id of an event id NATS cannot carry
// verbatim: the reserved prefix and the id's bytes in unpadded standard base64.
func encodedMsgID(id string) string {
	return natsjs.MsgIDPrefix + base64.RawStdEncoding.EncodeToString([]byte(id))
}

// Event ids nats.go would make one Nats-Msg-Id (it turns CR and LF into
// spaces and trims spaces and tabs at both ends) reach the stream each as
// a message of its own, carrying its exact id, and so does an id that
// starts with the reserved prefix beside the id whose encoded Msg-Id it
// spells. A redelivery of any of them inside the duplicate window is
// still dropped. Before, the second event of each pair was acknowledged
// as a duplicate, marked DONE and never stored.
func TestRelayMsgIDDistinctForEveryEventID(t *testing.T) {
	ids := []string{
		"a\nb", "a b", // the LF became a space
		" x", "x", // the leading space was trimmed
		"p", "p\t", // the trailing tab was trimmed
		"q\r\n", "q", "c\rd", "c d", "\tpad ", "pad",
		encodedMsgID("a\nb"), // NATS carries it verbatim, but it spells the Msg-Id of "a\nb"
		natsjs.MsgIDPrefix, "order-42 ü",
	}
	// Msg-Id = event id, as before, for the ids NATS carries verbatim.
	same := map[string]bool{"a b": true, "x": true, "p": true, "q": true, "c d": true, "pad": true, "order-42 ü": true}

	_, js := connect(t)
	st, prefix := newStream(t, js, nil)
	r, err := natsjs.New(js, natsjs.Config{Subject: prefix + ".{type}"})
	if err != nil {
		t.Fatal(err)
	}
	ob := relaytest.Outbox(t, outbox.Config{Dispatcher: dispatcher.Config{
		Workers: 4, MaxAttempts: 2, Retry: retry.Exponential{BaseDelay: 10 * time.Millisecond, MaxDelay: 20 * time.Millisecond}}}, r)
	var envs []core.Envelope
	for _, id := range ids {
		env, err := core.NewEvent("Id").ID(id).PayloadJSONString(`{}`).Build()
		if err != nil {
			t.Fatalf("id %q: %v", id, err)
		}
		envs = append(envs, env)
	}
	ulid, err := core.NewEvent("Id").PayloadJSONString(`{}`).Build() // a default id
	if err != nil {
		t.Fatal(err)
	}
	envs = append(envs, ulid)
	same[ulid.ID()] = true
	for _, env := range envs {
		relaytest.Publish(t, ob, env)
	}
	testsupport.WaitFor(t, 30*time.Second, "every event DONE or DEAD", func() bool {
		c := relaytest.Counts(t, ob)
		return c[core.StatusDone]+c[core.StatusDead] == len(envs)
	})
	ctx := context.Background()
	for _, env := range envs {
		rec, err := ob.Get(ctx, env.ID())
		if err != nil {
			t.Fatal(err)
		}
		if rec.Status != core.StatusDone || rec.Attempts != 0 {
			t.Errorf("event %q: %v after %d failed attempts, want DONE at the first: %s", env.ID(), rec.Status, rec.Attempts, rec.LastError)
		}
	}

	check := func(when string) {
		t.Helper()
		msgs := streamMsgs(t, st)
		if len(msgs) != len(envs) {
			t.Errorf("%s: %d messages in the stream, want one per event, %d", when, len(msgs), len(envs))
		}
		byID := map[string]string{} // event id to Msg-Id
		msgIDs := map[string]string{}
		for _, m := range msgs {
			h, err := natsjs.DecodeHeaders(m.Header)
			if err != nil {
				t.Fatalf("%s: DecodeHeaders: %v", when, err)
			}
			id, msgID := h.Get(relay.HeaderEventID), m.Header.Get(jetstream.MsgIDHeader)
			if prev, ok := byID[id]; ok {
				t.Errorf("%s: event %q stored twice, Nats-Msg-Id %q and %q", when, id, prev, msgID)
			}
			byID[id] = msgID
			if other, ok := msgIDs[msgID]; ok {
				t.Errorf("%s: events %q and %q share the Nats-Msg-Id %q", when, other, id, msgID)
			}
			msgIDs[msgID] = id
		}
		for _, env := range envs {
			msgID, ok := byID[env.ID()]
			switch {
			case !ok:
				t.Errorf("%s: event %q not in the stream", when, env.ID())
			case same[env.ID()] && msgID != env.ID():
				t.Errorf("%s: event %q: Nats-Msg-Id %q, want the event id", when, env.ID(), msgID)
			case msgID != natsjs.MsgID(env.ID()):
				t.Errorf("%s: event %q: Nats-Msg-Id %q, want %q", when, env.ID(), msgID, natsjs.MsgID(env.ID()))
			}
		}
	}
	check("relayed once")

	// The same events again, as the outbox stored them: a redelivery,
	// acknowledged as a duplicate within the window and not stored.
	for _, env := range envs {
		rec, err := ob.Get(ctx, env.ID())
		if err != nil {
			t.Fatal(err)
		}
		stored, err := rec.Envelope()
		if err != nil {
			t.Fatal(err)
		}
		if err := r.OnEvent(ctx, stored); err != nil {
			t.Errorf("redeliver %q: %v", env.ID(), err)
		}
	}
	check("redelivered")
}

// msgIDSet returns event ids that try every way of colliding: each
// string of up to three characters over spaces, tabs, CR, LF, letters
// that differ only in case, the prefix's first character and non-ASCII,
// the same inside and around the prefix, the encoded forms of all of
// them, and ids of the longest length.
func msgIDSet() []string {
	alphabet := []string{"a", "A", " ", "\t", "\r", "\n", "~", "ü", "😀", "\x01", "\x7f", ":"}
	ids := []string{""}
	level := []string{""}
	for range 3 {
		var next []string
		for _, s := range level {
			for _, c := range alphabet {
				next = append(next, s+c)
			}
		}
		ids = append(ids, next...)
		level = next
	}
	p := natsjs.MsgIDPrefix
	for _, c := range alphabet {
		ids = append(ids, p+c, c+p, p+p+c, p[:len(p)-1]+c, " "+p, p+" ")
	}
	ids = append(ids, p, p+p, p[:len(p)-1], p[1:], strings.ToUpper(p), strings.Repeat("😀", core.MaxEventIDLen),
		strings.Repeat(" ", core.MaxEventIDLen), strings.Repeat("x", core.MaxEventIDLen), "01ARZ3NDEKTSV4RRFFQ69G5FAV",
		"8f14e45f-ceea-467f-a9b8-3c1f2b0e0d6a", "a\nb", "a b", " x", "x", "p", "p\t", "order-42", "grüße", "x~b64:")
	for _, id := range ids[:len(ids):len(ids)] {
		ids = append(ids, encodedMsgID(id))
	}
	return ids
}

// MsgID is one to one and deterministic; it is the event id itself when
// NATS carries that verbatim and it does not start with the reserved
// prefix, and the prefix and the id in standard base64 otherwise; its result
// always travels verbatim.
func TestMsgID(t *testing.T) {
	ids := msgIDSet()
	seen := make(map[string]string, len(ids))
	for _, id := range ids {
		got := natsjs.MsgID(id)
		if again := natsjs.MsgID(strings.Clone(id)); again != got {
			t.Errorf("MsgID(%q) = %q, then %q", id, got, again)
		}
		if other, ok := seen[got]; ok && other != id {
			t.Errorf("MsgID(%q) = MsgID(%q) = %q", other, id, got)
		}
		seen[got] = id
		plain := id != "" && natsjs.VerbatimValue(id) && !strings.HasPrefix(id, natsjs.MsgIDPrefix)
		if plain && got != id {
			t.Errorf("MsgID(%q) = %q, want the id itself: NATS carries it verbatim", id, got)
		}
		if !plain && got != encodedMsgID(id) {
			t.Errorf("MsgID(%q) = %q, want %q", id, got, encodedMsgID(id))
		}
		if got == "" || !natsjs.VerbatimValue(got) || !utf8.ValidString(got) {
			t.Errorf("MsgID(%q) = %q, which NATS does not carry verbatim", id, got)
		}
	}
	for _, id := range []string{"a", "A", "a ", "a\nb", "a b", " x", "x", "p", "p\t"} {
		if other := seen[natsjs.MsgID(id)]; other != id {
			t.Errorf("MsgID(%q) is also MsgID(%q)", id, other)
		}
	}
	// Ordinary ids stay as they are.
	for _, id := range []string{"01ARZ3NDEKTSV4RRFFQ69G5FAV", "order-42", "a b", "grüße", "x~b64:"} {
		if got := natsjs.MsgID(id); got != id {
			t.Errorf("MsgID(%q) = %q, want it unchanged", id, got)
		}
	}
}
