package jdbcstore

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
)

func TestDialectDetection(t *testing.T) {
	t.Parallel()
	st, _ := openTestStore(t, Config{})
	if st.Dialect() != SQLite {
		t.Fatalf("dialect for sqlite3 = %v", st.Dialect())
	}
	if dialectForDriver("sqlite3") != SQLite || dialectForDriver("nope") != nil {
		t.Error("dialectForDriver")
	}
	other := sqlx.NewDb(st.DB().DB, "custom_sqlite")
	_, err := New(other, Config{})
	var ce *core.ConfigError
	if !errors.As(err, &ce) || ce.Field != "Dialect" || !errors.Is(err, core.ErrInvalidConfig) {
		t.Fatalf("unknown driver without Dialect: err = %v", err)
	}
	if _, err := New(other, Config{Dialect: SQLite}); err != nil {
		t.Fatalf("unknown driver with Dialect: %v", err)
	}
}

func TestSchemaSQL(t *testing.T) {
	t.Parallel()
	st, err := New(sqlx.NewDb(nil, "sqlite3"), Config{Table: "events_x"})
	if err != nil {
		t.Fatal(err)
	}
	sql := st.SchemaSQL()
	for _, want := range []string{
		`CREATE TABLE IF NOT EXISTS "events_x" (`,
		`CREATE INDEX IF NOT EXISTS "events_x_status_available_idx"`,
		`ON "events_x" (status, available_at, created_at);`,
		"locked_by", "locked_until", "payload_kind",
	} {
		if !strings.Contains(sql, want) {
			t.Errorf("schema lacks %q:\n%s", want, sql)
		}
	}
	if strings.Contains(sql, "{{") {
		t.Errorf("unrendered template:\n%s", sql)
	}
	if n := len(splitStatements(sql)); n != 2 {
		t.Errorf("%d statements, want 2", n)
	}
}

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

// Every statement has exactly the placeholders its documented arguments
// fill, and uses the quoted table.
func TestStatements(t *testing.T) {
	t.Parallel()
	q := buildStatements(SQLite, "tbl")
	cases := []struct {
		name, sql string
		args      int
	}{
		{"insert", q.insert, 13},
		{"markDone1", q.markDone1, 3},
		{"markDone3", inList(SQLite, q.markDonePrefix, 3, q.markDoneSuffix), 5},
		{"markRetry", q.markRetry, 5},
		{"markDead", q.markDead, 4},
		{"poll", q.poll, 3},
		{"claimReturning", q.claimReturning, 7},
		{"claimSelect", q.claimSelect, 5},
		{"reap", q.reap, 2},
		{"get", q.get, 1},
		{"countByStatus", q.countByStatus, 0},
	}
	for _, c := range cases {
		if n := strings.Count(c.sql, "?"); n != c.args {
			t.Errorf("%s has %d placeholders, want %d: %s", c.name, n, c.args, c.sql)
		}
		if !strings.Contains(c.sql, `"tbl"`) {
			t.Errorf("%s does not use the quoted table: %s", c.name, c.sql)
		}
	}
	for _, s := range []string{q.markDone1, q.markRetry, q.markDead} {
		if !strings.HasSuffix(s, "AND status <> 1 AND locked_by = ?") {
			t.Errorf("status write not guarded against DONE and fenced on the owner: %s", s)
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
	_, err = NewInbox(nil, Config{})
	check("NewInbox", err)
}
