package inbox_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/inbox"
)

// One bad key (empty, too long, not UTF-8, holding NUL) refuses the whole
// call of every method that acts on messages by key, on every database,
// with the package's sentinel in a *core.ValidationError naming the key,
// and nothing is written: the valid keys of the call are not acted on
// either. (PostgreSQL failed the call with an untyped driver error,
// "invalid byte sequence for encoding", while SQLite and MariaDB ignored
// the bad key as unknown and acted on the rest.)
func testBadKeys(t *testing.T, open opener) {
	e := newEnv(t, open, inbox.Config{})
	e.enqueue(inbox.Message{Source: "s", MessageID: "good"})
	mustEqual(t, "claimed", len(e.claim("w", time.Minute, 1)), 1)
	before := e.get("s", "good")
	good := key("s", "good")
	long := strings.Repeat("x", inbox.MaxIDLen+1)
	bad := []struct {
		name  string
		key   inbox.Key
		want  error
		field string
	}{
		{"invalid UTF-8 source", key("\xff", "good"), inbox.ErrInvalidText, "source"},
		{"invalid UTF-8 id", key("s", "\xffgood"), inbox.ErrInvalidText, "message_id"},
		{"NUL in id", key("s", "go\x00od"), inbox.ErrInvalidText, "message_id"},
		{"NUL in source", key("s\x00", "good"), inbox.ErrInvalidText, "source"},
		{"long id", key("s", long), inbox.ErrMessageIDTooLong, "message_id"},
		{"long source", key(long, "good"), inbox.ErrSourceTooLong, "source"},
		{"long id in characters", key("s", strings.Repeat("é", inbox.MaxIDLen+1)), inbox.ErrMessageIDTooLong, "message_id"},
		{"empty id", key("s", ""), inbox.ErrEmptyMessageID, "message_id"},
		{"empty source", key("", "good"), inbox.ErrEmptySource, "source"},
		{"zero key", inbox.Key{}, inbox.ErrEmptyMessageID, "message_id"},
	}
	ops := map[string]func(keys []inbox.Key) (int, error){
		"Ack":          func(keys []inbox.Key) (int, error) { return e.in.Ack(e.ctx, "w", keys) },
		"Release":      func(keys []inbox.Key) (int, error) { return e.in.Release(e.ctx, "w", keys) },
		"Abandon":      func(keys []inbox.Key) (int, error) { return e.in.Abandon(e.ctx, "w", keys, "x") },
		"AbandonAfter": func(keys []inbox.Key) (int, error) { return e.in.AbandonAfter(e.ctx, "w", keys, "x", time.Second) },
		"Fail":         func(keys []inbox.Key) (int, error) { return e.in.Fail(e.ctx, "w", keys, "x") },
	}
	for op, call := range ops {
		for _, b := range bad {
			for at, keys := range [][]inbox.Key{{b.key, good}, {good, b.key}} { // the bad key at index at
				n, err := call(keys)
				var ve *core.ValidationError
				wantField := fmt.Sprintf("keys[%d].%s", at, b.field)
				if !errors.Is(err, b.want) || !errors.As(err, &ve) || ve.Field != wantField || n != 0 {
					t.Errorf("%s(%s at %d) = %d, %v; want 0 and %v in a *core.ValidationError of field %s", op, b.name, at, n, err, b.want, wantField)
				}
			}
		}
	}
	after := e.get("s", "good")
	if after.Status != before.Status || after.LockedBy != before.LockedBy || !after.LockedUntil.Equal(before.LockedUntil) ||
		after.Attempt != before.Attempt || after.LastError != before.LastError {
		t.Fatalf("the valid key was acted on: %+v, before %+v", after, before)
	}
	// Unknown (valid) keys are ignored, as before.
	if n, err := e.in.Ack(e.ctx, "w", []inbox.Key{key("s", "unknown"), good}); err != nil || n != 1 {
		t.Fatalf("Ack(unknown, good) = %d, %v; want 1", n, err)
	}
	mustEqual(t, "status", e.get("s", "good").Status, inbox.StatusDone)
}
