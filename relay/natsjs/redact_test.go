package natsjs_test

import (
	"testing"

	"github.com/outbox-go/outbox/relay/natsjs"
)

// RedactURL keeps the servers of a list and leaves out users, passwords
// and tokens.
func TestRedactURL(t *testing.T) {
	for servers, want := range map[string]string{
		"nats://127.0.0.1:4222":                 "nats://127.0.0.1:4222",
		"nats://u:secret@a:4222, secret@b:4223": "nats://a:4222,nats://b:4223",
		"tls://token@x:4443":                    "tls://x:4443",
		"nats://a:4222,nats://%zz":              "<invalid URL>",
		"nats://":                               "<invalid URL>",
	} {
		if got := natsjs.RedactURL(servers); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", servers, got, want)
		}
	}
}
