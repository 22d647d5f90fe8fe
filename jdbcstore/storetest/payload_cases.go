package storetest

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/jdbcstore"
)

func (s *suite) testPayload(t *testing.T) {
	t.Run("JSONSemanticsKept", func(t *testing.T) {
		t.Parallel()
		st := s.newStore(t, nil, jdbcstore.Config{})
		// A database may normalize a JSON column (MySQL does), so only the
		// JSON value must survive; dialects that store bytes keep it
		// byte-exact and test that themselves.
		const doc = "{ \"b\" : 1,\n\t\"a\":\"\\u00e9\\n\", \"n\": 2.50, \"z\": [ ], \"o\": {\"k\": [true, false, null]} }"
		env := build(t, core.NewEvent("Semantics").ID("evt-json-semantics").PayloadJSONString(doc))
		insert(t, st, env)
		rec := get(t, st, env.ID())
		if rec.PayloadKind != core.PayloadJSON {
			t.Fatalf("PayloadKind = %v, want json", rec.PayloadKind)
		}
		samePayload(t, env.ID(), core.PayloadJSON, rec.Payload, []byte(doc))
	})

	t.Run("BinaryAllByteValues", func(t *testing.T) {
		t.Parallel()
		st := s.newStore(t, nil, jdbcstore.Config{})
		p := make([]byte, 0, 512)
		for i := range 256 {
			p = append(p, byte(i))
		}
		for i := 255; i >= 0; i-- {
			p = append(p, byte(i))
		}
		env := build(t, core.NewEvent("Binary").ID("evt-binary").PayloadBytes(p))
		insert(t, st, env)
		rec := get(t, st, env.ID())
		if rec.PayloadKind != core.PayloadBytes {
			t.Errorf("PayloadKind = %v, want bytes", rec.PayloadKind)
		}
		if !bytes.Equal(rec.Payload, p) {
			t.Errorf("payload differs:\n got %x\nwant %x", rec.Payload, p)
		}
		sameEnvelope(t, rec, env)
		_, recs := poll(t, st, time.Now().Add(time.Hour), 0, 10)
		if len(recs) != 1 || !bytes.Equal(recs[0].Payload, p) || recs[0].PayloadKind != core.PayloadBytes {
			t.Errorf("polled payload differs")
		}
	})

	t.Run("EmptyBytes", func(t *testing.T) {
		t.Parallel()
		st := s.newStore(t, nil, jdbcstore.Config{})
		env := build(t, core.NewEvent("Empty").ID("evt-empty-bytes").PayloadBytes([]byte{}))
		insert(t, st, env)
		rec := get(t, st, env.ID())
		if len(rec.Payload) != 0 || rec.PayloadKind != core.PayloadBytes {
			t.Fatalf("payload = %x (kind %v), want empty bytes", rec.Payload, rec.PayloadKind)
		}
		sameEnvelope(t, rec, env)
	})

	t.Run("Exactly1MiB", func(t *testing.T) {
		t.Parallel()
		st := s.newStore(t, nil, jdbcstore.Config{})
		bin := make([]byte, core.MaxPayloadBytes)
		x := uint32(2463534242)
		for i := range bin { // xorshift: deterministic, incompressible
			x ^= x << 13
			x ^= x >> 17
			x ^= x << 5
			bin[i] = byte(x)
		}
		doc := `"` + strings.Repeat("j", core.MaxPayloadBytes-2) + `"`
		// An array of zeros: a database that writes JSON back with a space
		// after each comma (PostgreSQL's jsonb, MySQL 8) reads it back half
		// as long again, past the limit; it must still be deliverable.
		zeros := "[" + strings.Repeat("0,", core.MaxPayloadBytes/2-2) + "0 ]"
		envs := []core.Envelope{
			build(t, core.NewEvent("Big").ID("evt-1mib-bytes").PayloadBytes(bin)),
			build(t, core.NewEvent("Big").ID("evt-1mib-json").PayloadJSONString(doc)),
			build(t, core.NewEvent("Big").ID("evt-1mib-array").PayloadJSONString(zeros)),
		}
		for _, env := range envs {
			if env.PayloadLen() != core.MaxPayloadBytes {
				t.Fatalf("test payload is %d bytes", env.PayloadLen())
			}
			insert(t, st, env)
		}
		for _, env := range envs {
			rec := get(t, st, env.ID())
			if rec.PayloadKind != env.PayloadKind() {
				t.Errorf("%s: kind %v, want %v", env.ID(), rec.PayloadKind, env.PayloadKind())
			}
			samePayload(t, env.ID(), env.PayloadKind(), rec.Payload, env.RawPayload())
			if _, err := rec.Envelope(); err != nil {
				t.Errorf("%s: read back (%d bytes), it cannot be delivered: %v", env.ID(), len(rec.Payload), err)
			}
		}
	})
}
