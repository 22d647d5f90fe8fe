package dashboard_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dashboard"
)

// nestBomb is valid JSON that indents quadratically: n arrays nested
// depth deep, side by side. Indented, each nest takes about 2 × depth²
// bytes: 6 nests of 3,000 make 36 KB that indent to about 108 MB.
func nestBomb(n, depth int) string {
	nest := strings.Repeat("[", depth) + strings.Repeat("]", depth)
	return "[" + strings.TrimSuffix(strings.Repeat(nest+",", n), ",") + "]"
}

func TestEventPageBoundsAPayloadThatIndentsToMuchMore(t *testing.T) {
	st := newStore(t)
	bomb := nestBomb(6, 3000)
	// A big payload of ordinary shape still indents (about 2.7 times its
	// size here).
	big := `{"items":[` + strings.TrimSuffix(strings.Repeat(`{"a":1,"b":"x"},`, 12000), ",") + `]}`
	seed(t, st, event{id: "bomb", typ: "T", status: core.StatusDead, payload: bomb},
		event{id: "big", typ: "T", status: core.StatusDead, payload: big})
	c := newClient(t, newDashboard(t, dashboard.Config{Store: st, ShowPayloads: true}))

	code, body := c.get("/event?id=bomb")
	if code != http.StatusOK {
		t.Fatalf("GET = %d", code)
	}
	if len(body) > 2<<20 {
		t.Fatalf("the page of a %d-byte payload is %d bytes", len(bomb), len(body))
	}
	// Shown as stored, and said so.
	mustContain(t, body, `id="payload"`, "[[[[[[[[[[]]]]]]]]]]", "JSON as stored")

	code, body = c.get("/event?id=big")
	if code != http.StatusOK {
		t.Fatalf("GET = %d", code)
	}
	mustContain(t, body, "\n    {\n      &#34;a&#34;: 1,\n")
	mustNotContain(t, body, "JSON as stored")
}

// A JSON payload larger than the page shows (256 KiB, of up to 1 MiB) is
// shown as JSON text, its first 256 KiB as stored, and said so: it was
// shown as base64, unreadable.
func TestEventPageShowsTheStartOfALargeJSONPayload(t *testing.T) {
	st := newStore(t)
	large := `{"items":[` + strings.TrimSuffix(strings.Repeat(`{"n":"é"},`, 40000), ",") + `]}` // about 440 KB
	seed(t, st, event{id: "large", typ: "T", status: core.StatusDead, payload: large})
	c := newClient(t, newDashboard(t, dashboard.Config{Store: st, ShowPayloads: true}))
	code, body := c.get("/event?id=large")
	if code != http.StatusOK {
		t.Fatalf("GET = %d", code)
	}
	mustContain(t, body, `{&#34;items&#34;:[{&#34;n&#34;:&#34;é&#34;},`, "JSON as stored, first 256 KiB")
	mustNotContain(t, body, "base64", "eyJpdGVtcyI6")
	if len(body) > 2<<20 {
		t.Fatalf("the page of a %d-byte payload is %d bytes", len(large), len(body))
	}
}
