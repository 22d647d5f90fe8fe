package jdbcstore

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/outbox-go/outbox/core"
)

func TestSplitStatements(t *testing.T) {
	t.Parallel()
	got := splitStatements("-- a; comment\nCREATE TABLE t (\n  a INT -- x\n);\n\n  -- other;\nCREATE INDEX i ON t (a);\nSELECT 1")
	want := []string{"CREATE TABLE t (\n  a INT -- x\n);", "CREATE INDEX i ON t (a);", "SELECT 1"}
	if len(got) != len(want) {
		t.Fatalf("got %q", got)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("stmt %d = %q, want %q", i, got[i], want[i])
		}
	}
}

func TestTruncateError(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   string
		max  int
		want string
	}{
		{"", 5, ""},
		{"abc", 5, "abc"},
		{"abcdef", 5, "abcde"},
		{"ééééé", 5, "ééééé"},
		{"éééééé", 5, "ééééé"},
		{"a🙂b🙂c🙂", 4, "a🙂b🙂"},
		{"x\xffy", 5, "x\uFFFDy"},
		{"a\x00b", 5, "a\uFFFDb"},
		{"abc", 0, ""},
	}
	for _, c := range cases {
		if got := truncateError(c.in, c.max); got != c.want {
			t.Errorf("truncateError(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
	}
}

func FuzzTruncateError(f *testing.F) {
	f.Add("héllo wörld 🙂", uint16(4))
	f.Add("\xff\xfe\x00abc", uint16(2))
	f.Fuzz(func(t *testing.T, msg string, max uint16) {
		got := truncateError(msg, int(max))
		if !utf8.ValidString(got) || strings.IndexByte(got, 0) >= 0 {
			t.Fatalf("result %q is not clean UTF-8", got)
		}
		if n := utf8.RuneCountInString(got); n > int(max) {
			t.Fatalf("%d characters, max %d", n, max)
		}
		clean := strings.ReplaceAll(strings.ToValidUTF8(msg, "\uFFFD"), "\x00", "\uFFFD")
		if !strings.HasPrefix(clean, got) {
			t.Fatalf("%q is not a prefix of %q", got, clean)
		}
		if utf8.RuneCountInString(clean) <= int(max) && got != clean {
			t.Fatalf("short message changed: %q -> %q", clean, got)
		}
	})
}

// Both constructors refuse a nil database with a ConfigError naming it.
func TestNilDatabaseRefused(t *testing.T) {
	t.Parallel()
	check := func(name string, err error) {
		t.Helper()
		var ce *core.ConfigError
		if !errors.As(err, &ce) || ce.Field != "db" || !errors.Is(err, core.ErrInvalidConfig) {
			t.Fatalf("%s(nil) error = %v, want a ConfigError for db wrapping ErrInvalidConfig", name, err)
		}
	}
	_, err := New(nil, Config{})
	check("New", err)
	_, err = newInboxStore(nil, Config{})
	check("newInboxStore", err)
}
