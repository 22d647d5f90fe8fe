package dashboard

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/outbox-go/outbox/internal/hostname"
)

// hostPort is an entry of Config.AllowedHosts, or the Host of a request:
// a lower-case name without a trailing dot, or an IP address in its
// canonical form (IPv6 without brackets), and a port ("" for none).
type hostPort struct{ name, port string }

// parseHost splits h ("name", "name:port", "1.2.3.4", "[::1]:8080";
// also "::1", as no Host header writes it) into a hostPort.
func parseHost(h string) (hostPort, error) {
	var hp hostPort
	switch {
	case strings.HasPrefix(h, "["):
		end := strings.IndexByte(h, ']')
		if end < 0 {
			return hp, errors.New("opens '[' without closing it")
		}
		hp.name = h[1:end]
		rest := h[end+1:]
		if rest != "" {
			p, ok := strings.CutPrefix(rest, ":")
			if !ok {
				return hp, fmt.Errorf("holds %q after ']'", rest)
			}
			hp.port = p
		}
		if a, err := netip.ParseAddr(hp.name); err != nil || !a.Is6() {
			return hp, errors.New("holds no IPv6 address within [ ]")
		}
	case strings.Count(h, ":") > 1:
		hp.name = h // an IPv6 address without brackets (a configured host)
	default:
		name, p, found := strings.Cut(h, ":")
		hp.name = name
		if found {
			hp.port = p
		}
	}
	if hp.port != "" || strings.HasSuffix(h, ":") {
		// Digits only: Atoi takes "+80", which no Host header carries.
		if n, err := strconv.Atoi(hp.port); err != nil || n < 1 || n > 65535 || hp.port[0] < '1' || hp.port[0] > '9' {
			return hp, fmt.Errorf("port must be 1..65535, got %q", hp.port)
		}
	}
	if a, err := netip.ParseAddr(hp.name); err == nil {
		hp.name = a.WithZone("").String()
		if a.Zone() != "" {
			return hp, errors.New("names an IPv6 zone")
		}
		return hp, nil
	}
	hp.name = strings.TrimSuffix(strings.ToLower(hp.name), ".")
	if err := checkHostName(hp.name); err != nil {
		return hp, err
	}
	return hp, nil
}

// checkHostName checks a DNS name: labels of letters, digits, '-' and
// '_', not starting or ending with '-', separated by single dots.
func checkHostName(name string) error {
	if name == "" || len(name) > 253 {
		return fmt.Errorf("must be a host name of 1..253 characters, got %d", len(name))
	}
	for label := range strings.SplitSeq(name, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("%q is not a host name: labels of 1..63 letters, digits or '-' between dots", name)
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return fmt.Errorf("%q holds %q: a host name has letters, digits, '-', '_' and '.'", name, r)
			}
		}
	}
	return nil
}

// checkAllowedHost checks an entry of Config.AllowedHosts.
func checkAllowedHost(h string) (hostPort, error) {
	if h == "*" {
		return hostPort{}, errors.New(`"*" is not a host: leave AllowedHosts empty to answer to any host`)
	}
	if strings.ContainsAny(h, "/@?#") || strings.ContainsFunc(h, func(r rune) bool { return r <= ' ' || r >= 0x7f }) {
		return hostPort{}, fmt.Errorf("must be a host such as ops.example.com or 127.0.0.1:8080 (no scheme, user info, path or spaces), got %q", trunc(80, h))
	}
	hp, err := parseHost(h)
	if err != nil {
		return hp, fmt.Errorf("%q: %v", trunc(80, h), err)
	}
	if _, err := netip.ParseAddr(hp.name); err != nil && hostname.EndsInNumber(hp.name) {
		return hp, fmt.Errorf("%q: a browser reads a name ending in a number as an IPv4 address, and sends it in dotted-decimal form (127.0.0.1): write it so, or as a name", trunc(80, h))
	}
	return hp, nil
}

// hostCheck refuses the requests whose Host is not among allowed with
// 421 Misdirected Request, before the next handler sees them.
type hostCheck struct {
	allowed []hostPort
	next    http.Handler
	log     *slog.Logger
}

func (c hostCheck) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !c.allows(r.Host) {
		c.log.WarnContext(r.Context(), "outbox dashboard: request for a host not in AllowedHosts refused",
			"host", trunc(100, r.Host), "path", trunc(100, r.URL.Path))
		w.Header().Set("Cache-Control", "no-store")
		http.Error(w, "misdirected request: the dashboard does not answer to this host", http.StatusMisdirectedRequest)
		return
	}
	c.next.ServeHTTP(w, r)
}

// allows reports whether the Host header host names an allowed host:
// the same name, and the same port when the entry names one.
func (c hostCheck) allows(host string) bool {
	hp, err := parseHost(host)
	if err != nil {
		return false
	}
	for _, a := range c.allowed {
		if a.name == hp.name && (a.port == "" || a.port == hp.port) {
			return true
		}
	}
	return false
}
