package natsjs

import (
	"net/url"
	"strings"
)

// RedactURL returns a nats.go server list (comma-separated URLs, as
// nats.Connect takes it; "nats://" where one has no scheme) without the
// users, passwords and tokens of its URLs, for log lines and errors:
// "nats://u:secret@a:4222, b:4223" gives "nats://a:4222,nats://b:4223".
// A list with a URL that does not parse, or has no host, gives
// "<invalid URL>".
func RedactURL(servers string) string {
	var out []string
	for s := range strings.SplitSeq(servers, ",") {
		s = strings.TrimSpace(s)
		if !strings.Contains(s, "://") {
			s = "nats://" + s
		}
		u, err := url.Parse(s)
		if err != nil || u.Host == "" {
			return "<invalid URL>"
		}
		u.User = nil
		out = append(out, u.String())
	}
	return strings.Join(out, ",")
}
