package dashboard_test

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dashboard"
)

// getHost GETs path with the Host header host.
func (c *client) getHost(path, host string) (int, string) {
	c.t.Helper()
	req, err := http.NewRequestWithContext(c.t.Context(), http.MethodGet, c.srv.URL+path, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Host = host
	return c.do(req)
}

// port is the ":port" of the test server.
func port(srvURL string) string { return srvURL[strings.LastIndex(srvURL, ":"):] }

// A page at http://attacker.example:PORT whose name is rebound to the
// dashboard's loopback address makes same-origin requests (the Host and
// the Origin name attacker.example): only the Host tells them apart.
func TestAllowedHostsRefuseADNSRebindingPage(t *testing.T) {
	st := newStore(t)
	seed(t, st, event{id: "d1", typ: "T", status: core.StatusDead})
	called := false
	srv := newDashboard(t, dashboard.Config{Store: st, AllowMutations: true, ShowPayloads: true,
		AllowedHosts: []string{"127.0.0.1", "localhost"},
		Middleware: func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				called = true
				next.ServeHTTP(w, r)
			})
		}})
	c := newClient(t, srv)
	evil := "attacker.example" + port(srv.URL)
	for _, p := range []string{"/", "/dead", "/event?id=d1", "/replay?id=d1", "/static/app.js"} {
		if code, body := c.getHost(p, evil); code != http.StatusMisdirectedRequest || strings.Contains(body, "d1") {
			t.Errorf("GET %s with Host %s = %d, want 421:\n%s", p, evil, code, body)
		}
	}
	if called {
		t.Error("the middleware ran for a refused host")
	}
	if len(c.jar) != 0 {
		t.Errorf("a refused host got cookies: %v", c.jar)
	}

	// The same replay from the dashboard's own host goes through; from
	// the rebound page it is refused and changes nothing.
	_, body := c.get("/replay?id=d1")
	tok := csrfToken(t, body)
	form := url.Values{"csrf": {tok}, "id": {"d1"}, "confirm": {"yes"}}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/replay", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = evil
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://"+evil)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	if code, _ := c.do(req); code != http.StatusMisdirectedRequest {
		t.Errorf("POST from the rebound page = %d, want 421", code)
	}
	if s := statusOf(t, st, "d1"); s != core.StatusDead {
		t.Fatalf("d1 is %s after a refused POST", s)
	}
	if code, body := c.post("/replay", form, nil); code != http.StatusOK {
		t.Fatalf("POST from the dashboard's host = %d\n%s", code, body)
	}
	if !called {
		t.Error("the middleware did not run for an allowed host")
	}
}

func TestAllowedHostsMatching(t *testing.T) {
	st := newStore(t)
	srv := newDashboard(t, dashboard.Config{Store: st,
		AllowedHosts: []string{"LocalHost", "127.0.0.1", "::1", "ops.example.com:8443", "[fe80::1]:9000"}})
	c := newClient(t, srv)
	p := port(srv.URL)
	for host, want := range map[string]int{
		"localhost" + p:         http.StatusOK,
		"localhost":             http.StatusOK,
		"LOCALHOST.":            http.StatusOK,
		"127.0.0.1" + p:         http.StatusOK,
		"[::1]" + p:             http.StatusOK,
		"[0:0::1]" + p:          http.StatusOK,
		"ops.example.com:8443":  http.StatusOK,
		"[fe80::1]:9000":        http.StatusOK,
		"ops.example.com":       http.StatusMisdirectedRequest, // the entry names a port
		"ops.example.com" + p:   http.StatusMisdirectedRequest,
		"[fe80::1]" + p:         http.StatusMisdirectedRequest,
		"localhost.example" + p: http.StatusMisdirectedRequest,
		"127.0.0.2" + p:         http.StatusMisdirectedRequest,
		"evil.localhost" + p:    http.StatusMisdirectedRequest,
		"127.0.0.1:1:2":         http.StatusMisdirectedRequest,
	} {
		if code, _ := c.getHost("/", host); code != want {
			t.Errorf("Host %q = %d, want %d", host, code, want)
		}
	}

	// Without AllowedHosts any host is served: the application in front
	// authenticates.
	c = newClient(t, newDashboard(t, dashboard.Config{Store: st}))
	if code, _ := c.getHost("/", "anything.example"); code != http.StatusOK {
		t.Errorf("no AllowedHosts: Host anything.example = %d, want 200", code)
	}
}

func TestAllowedHostsValidation(t *testing.T) {
	st := newStore(t)
	for _, h := range []string{"", "*", "http://localhost", "localhost/", "user@localhost", "local host",
		"localhost:", "localhost:0", "localhost:65536", "localhost:http", "[::1", "[localhost]", "a..b", "-a.example", "[::1]x",
		"localhost:+80", "localhost:080", // a sign or a leading zero: no Host header carries them
		"127.0.0.01", "127.1", "0x7f.0.0.1", "1.2.3.4.5", "host.example.123", "256.0.0.1:80", "a.0x"} { // a browser reads a name ending in a number as IPv4
		_, err := dashboard.New(dashboard.Config{Store: st, AllowedHosts: []string{"localhost", h}})
		var ce *core.ConfigError
		if !errors.As(err, &ce) || ce.Field != "AllowedHosts[1]" {
			t.Errorf("AllowedHosts %q: New = %v, want a ConfigError on AllowedHosts[1]", h, err)
		}
	}
	for _, h := range []string{"localhost", "localhost:8080", "127.0.0.1:1", "[::1]:65535", "::1", "ops-1.example.com.", "xn--bcher-kva.example", "my_host", "host-1.example", "1host.example", "a.0xg", "10.0.0.1."} {
		if _, err := dashboard.New(dashboard.Config{Store: st, AllowedHosts: []string{h}}); err != nil {
			t.Errorf("AllowedHosts %q: %v", h, err)
		}
	}
}
