package inbox_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/inbox"
)

// ListPreview lists what List lists, in the same pages, with each
// payload cut to its first bytes, byte for byte.
func testListPreview(t *testing.T, open opener) {
	e := newEnv(t, open, inbox.Config{})
	payloads := map[string][]byte{
		"m-0": bytes.Repeat([]byte{0, 0xff, 'a'}, 1000),
		"m-1": []byte("short"),
		"m-2": {},
		"m-3": []byte(strings.Repeat("é", 600)),
	}
	for id, p := range payloads {
		e.enqueue(inbox.Message{Source: "s", MessageID: id, Payload: p, Hash: []byte("h-" + id)})
	}
	for _, n := range []int{0, 1, 7, 2000} {
		for _, page := range []struct {
			after inbox.Key
			limit int
		}{{inbox.Key{}, 10}, {inbox.Key{}, 2}, {inbox.Key{Source: "s", MessageID: "m-1"}, 10}} {
			full, err := e.in.List(e.ctx, inbox.StatusProcessing, page.after, page.limit)
			if err != nil {
				t.Fatal(err)
			}
			cut, err := e.in.ListPreview(e.ctx, inbox.StatusProcessing, page.after, page.limit, n)
			if err != nil {
				t.Fatalf("ListPreview(%d): %v", n, err)
			}
			mustEqual(t, fmt.Sprintf("keys (preview %d, after %v)", n, page.after), strings.Join(keysOf(cut), " "), strings.Join(keysOf(full), " "))
			for i, r := range cut {
				want := full[i].Payload[:min(n, len(full[i].Payload))]
				if !bytes.Equal(r.Payload, want) || r.Payload == nil {
					t.Errorf("preview %d of %s: %d bytes %q, want %d bytes", n, r.MessageID, len(r.Payload), r.Payload[:min(10, len(r.Payload))], len(want))
				}
				f := full[i]
				if r.Topic != f.Topic || !bytes.Equal(r.Hash, f.Hash) || r.Status != f.Status || r.Attempt != f.Attempt ||
					!r.FirstSeenAt.Equal(f.FirstSeenAt) || !r.NextAttemptAt.Equal(f.NextAttemptAt) || r.DecodeErr != nil {
					t.Errorf("preview %d of %s: %+v, want %+v", n, r.MessageID, r, f)
				}
			}
		}
	}
	for _, bad := range []struct{ limit, preview int }{{0, 1}, {1, -1}, {1, inbox.MaxPayloadBytes + 1}} {
		if _, err := e.in.ListPreview(e.ctx, inbox.StatusDead, inbox.Key{}, bad.limit, bad.preview); !errors.Is(err, core.ErrInvalidConfig) {
			t.Errorf("ListPreview(limit %d, preview %d) = %v, want ErrInvalidConfig", bad.limit, bad.preview, err)
		}
	}
}
