package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
)

func TestDeadShowJSONBoundsAPayloadThatIndentsToMuchMore(t *testing.T) {
	path, store := sqliteDB(t)
	// Valid JSON that indents quadratically: 3 nests of 3,000 arrays, 18 KB,
	// indent to about 54 MB.
	nest := strings.Repeat("[", 3000) + strings.Repeat("]", 3000)
	bomb := "[" + nest + "," + nest + "," + nest + "]"
	env, err := core.NewEvent("T").ID("bomb").PayloadJSONString(bomb).Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Insert(t.Context(), store.DB(), env, core.Lease{Owner: "o", Until: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	out := ok(t, "--dsn", path, "--json", "dead", "show", "bomb")
	if len(out) > 1<<20 {
		t.Fatalf("dead show --json of a %d-byte payload printed %d bytes", len(bomb), len(out))
	}
	var r recordJSON
	decodeJSON(t, out, &r)
	var got bytes.Buffer
	if err := json.Compact(&got, r.Payload); err != nil || got.String() != bomb {
		t.Errorf("payload is not the stored document (%v)", err)
	}
	// The fields are still one a line.
	if !strings.HasPrefix(out, "{\n  \"event_id\": \"bomb\",\n  \"event_type\": \"T\",\n") {
		t.Errorf("output starts %q", out[:min(len(out), 80)])
	}
}
