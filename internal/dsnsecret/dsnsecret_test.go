package dsnsecret_test

import (
	"strings"
	"testing"

	"github.com/outbox-go/outbox/internal/dsnsecret"
)

func TestMask(t *testing.T) {
	for in, want := range map[string]string{
		"root:pw@tcp(127.0.0.1:3306)/db":                             "root:***@tcp(127.0.0.1:3306)/db",
		"mysql://u:p@ss:w/rd@tcp(h:1)/db?x=1":                        "mysql://u:***@tcp(h:1)/db?x=1",
		"MySQL://u:p@ss:w/rd@tcp(h:1)/db?x=1":                        "MySQL://u:***@tcp(h:1)/db?x=1",
		"root@tcp(127.0.0.1:3306)/db":                                "root@tcp(127.0.0.1:3306)/db",
		"/var/lib/app:1@x/outbox.db":                                 "/var/lib/app:1@x/outbox.db",
		"postgres://app:s3cr3t@db:5432/shop?sslmode=disable":         "postgres://app:***@db:5432/shop?sslmode=disable",
		"postgresql://app@db/shop?password=s3cr3t&sslmode=disable":   "postgresql://app@db/shop?password=***&sslmode=disable",
		"postgres://app:p%40ss@db/shop?sslmode=disable&password=two": "postgres://app:***@db/shop?sslmode=disable&password=***",
		"root:pw@tcp(h)/db?allowNativePasswords=true":                "root:***@tcp(h)/db?allowNativePasswords=true",
		"file:app.db?_auth_user=a&_auth_pass=s3cr3t&mode=rw":         "file:app.db?_auth_user=a&_auth_pass=***&mode=rw",
		"host=h user=u password='Sec r3t' dbname=d":                  "host=h user=u password=*** dbname=d",
		"host=h user=u password = Secr3t dbname=d":                   "host=h user=u password = *** dbname=d",
		`host=h user=u password=Sec\ r3t dbname=d`:                   "host=h user=u password=*** dbname=d",
	} {
		if got := dsnsecret.Mask(in); got != want {
			t.Errorf("Mask(%q) = %q, want %q", in, got, want)
		}
	}
}

// Scrub removes a password from a message in every form a driver may
// show it: as written, unquoted, unescaped, URL-decoded, or a piece of it
// (pgx masks what it takes for the password and quotes the rest).
func TestScrub(t *testing.T) {
	for _, tc := range []struct{ dsn, msg string }{
		{"postgres://postgres:Sec@r3tPW@127.0.0.1:badport/test", "cannot parse `postgres://postgres:xxxxx@r3tPW@127.0.0.1:badport/test`: invalid port"},
		{"postgres://postgres:Sec%40r3tPW@127.0.0.1/test", "password authentication failed: Sec@r3tPW"},
		{"host=127.0.0.1 port=x user=postgres password='Sec r3tPW' dbname=test", "cannot parse `host=127.0.0.1 port=x user=postgres password=Sec r3tPW`"},
		{"host=127.0.0.1 port=x user=postgres password = Secr3tPW dbname=test", "cannot parse `host=127.0.0.1 port=x user=postgres password = Secr3tPW dbname=test`"},
		{`host=127.0.0.1 port=x user=postgres password=Sec\ r3tPW dbname=test`, "cannot parse `host=127.0.0.1 port=x user=postgres password=xxxxx r3tPW dbname=test`"},
		{`host=127.0.0.1 port=x user=postgres password='Sec\'r3tPW' dbname=test`, "invalid: Sec'r3tPW"},
		{"app:Secr3tPW@tcp(127.0.0.1:3306)/test", "Error 1045: Access denied for user app (using password Secr3tPW)"},
	} {
		got := dsnsecret.Scrub(tc.msg, tc.dsn)
		if strings.Contains(got, "r3tPW") || strings.Contains(got, "Sec") {
			t.Errorf("Scrub(%q) for %q = %q: a piece of the password is left", tc.msg, tc.dsn, got)
		}
	}
	if got := dsnsecret.Scrub("dial tcp 127.0.0.1:5432: connection refused", "postgres://app:pw@127.0.0.1/shop"); got != "dial tcp 127.0.0.1:5432: connection refused" {
		t.Errorf("Scrub changed a message without the password: %q", got)
	}
	// A password shorter than a fragment is masked where it stands on its
	// own, not inside other words (a one-letter password garbled every
	// word holding that letter).
	for msg, want := range map[string]string{
		"schema print: --dialect postgres contradicts --dsn, which is mysql": "schema print: --dialect postgres contradicts --dsn, which is mysql",
		"Access denied for user u (using password p)":                        "Access denied for user u (using password ***)",
		"invalid DSN u:p@tcp(h:3306)/db":                                     "invalid DSN u:***@tcp(h:3306)/db",
		"p":                                                                  "***",
	} {
		if got := dsnsecret.Scrub(msg, "u:p@tcp(h:3306)/db"); got != want {
			t.Errorf("Scrub(%q) with password p = %q, want %q", msg, got, want)
		}
	}
}
