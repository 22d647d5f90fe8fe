package core_test

import (
	"strings"
	"testing"

	"github.com/outbox-go/outbox/core"
)

// An event's own traceparent that a W3C propagator cannot read (written
// by hand, copied from a broken request) yields to the observer's, with
// its tracestate: otherwise the event carries a trace context no one can
// read and its deliveries join no trace. A readable one is kept.
func TestWithHeadersReplacesAnUnreadableTraceparent(t *testing.T) {
	const (
		valid  = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
		theirs = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	)
	added := map[string]string{"traceparent": theirs, "tracestate": "ob=1"}
	for name, tc := range map[string]struct {
		own  string
		keep bool
	}{
		"valid":                {valid, true},
		"unsampled":            {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00", true},
		"random flag":          {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-03", true},
		"later version":        {"01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", true},
		"later version, extra": {"01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-what-comes-next", true},
		"garbage":              {"not-a-traceparent", false},
		"all-zero trace id":    {"00-00000000000000000000000000000000-b7ad6b7169203331-01", false},
		"all-zero parent id":   {"00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01", false},
		"version ff":           {"ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", false},
		"upper case":           {"00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01", false},
		"version 00, extra":    {valid + "-x", false},
		"version 00, flags 04": {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-04", false},
		"short trace id":       {"00-0af7651916cd43dd8448eb211c8031-b7ad6b7169203331-01", false},
		"later version, glued": {"01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01x", false},
		"oversized":            {strings.Repeat("a", 20000), false},
		"no flags":             {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331", false},
		"non-hex":              {"00-0af7651916cd43dd8448eb211c80319g-b7ad6b7169203331-01", false},
	} {
		t.Run(name, func(t *testing.T) {
			env, err := core.NewEvent("T").Header("traceparent", tc.own).Header("tracestate", "own=1").PayloadJSONString(`{}`).Build()
			if err != nil {
				t.Fatal(err)
			}
			got, err := env.WithHeaders(added)
			if err != nil {
				t.Fatal(err)
			}
			parent, _ := got.Header("traceparent")
			state, _ := got.Header("tracestate")
			switch {
			case tc.keep && (parent != tc.own || state != "own=1"):
				t.Errorf("a readable trace context was replaced: %q %q", parent, state)
			case !tc.keep && (parent != theirs || state != "ob=1"):
				t.Errorf("an unreadable trace context was kept: %q %q", parent, state)
			}
		})
	}
	// Its tracestate goes with it also when the observer writes none; an
	// observer writing no traceparent leaves the event's headers alone.
	env, err := core.NewEvent("T").Header("traceparent", "junk").Header("tracestate", "own=1").PayloadJSONString(`{}`).Build()
	if err != nil {
		t.Fatal(err)
	}
	got, err := env.WithHeaders(map[string]string{"traceparent": theirs})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got.Header("tracestate"); ok {
		t.Errorf("the unreadable traceparent's tracestate stayed: %v", got.Headers())
	}
	got, err = env.WithHeaders(map[string]string{"baggage": "k=v"})
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := got.Header("traceparent"); p != "junk" {
		t.Errorf("headers without a traceparent changed the event's: %v", got.Headers())
	}
}
