package txctx

import (
	"strings"
	"testing"
)

// containsFoldASCII finds the word in any ASCII case, anywhere, and
// nothing else: not a near miss, not a word cut by the end of the text,
// not a Unicode look-alike that no database reads as the keyword.
func TestContainsFoldASCII(t *testing.T) {
	cases := []struct {
		s    string
		want bool
	}{
		{"rollback", true},
		{"ROLLBACK TO SAVEPOINT s1", true},
		{"/* nested */ RoLlBaCk TRANSACTION TO s1", true},
		{"SAVEPOINT s1; rollback", true},
		{"rrollback", true},
		{"INSERT INTO t VALUES ('rollbac')", false},
		{"rollbac", false},
		{"", false},
		{"ROLLBAC\u212A", false}, // the Kelvin sign folds to k in Unicode only
		{"R\x00LLBACK", false},
		{"INSERT INTO outbox_events (event_id, status) VALUES (?, ?)", false},
		{"rOLLBACk", true},
		{"@OLLBACK", false}, // '@'|0x20 is '`', not 'r'
		{"2OLLBACK", false},
	}
	for _, c := range cases {
		if got := containsFoldASCII(c.s, "rollback"); got != c.want {
			t.Errorf("containsFoldASCII(%q) = %v, want %v", c.s, got, c.want)
		}
	}
	// Against strings.Contains on the lower-cased text, over every
	// position of the word in a statement of plain ASCII.
	base := strings.Repeat("insert into t (a, b) values (?, ?); ", 3)
	for i := 0; i <= len(base); i++ {
		s := base[:i] + "RollBack" + base[i:]
		if !containsFoldASCII(s, "rollback") {
			t.Fatalf("missed the word at offset %d of %q", i, s)
		}
		if cut := s[:i+7]; containsFoldASCII(cut, "rollback") != strings.Contains(strings.ToLower(cut), "rollback") {
			t.Fatalf("disagrees with strings.Contains on %q", cut)
		}
	}
}

// outboxInsert is as long as the outbox's insert.
const outboxInsert = "INSERT INTO outbox_events (event_id, event_type, aggregate_type, aggregate_id, tenant_id, payload, headers, " +
	"status, attempts, next_attempt_at, created_at, locked_by, locked_until, order_key, order_seq) " +
	"VALUES (?, ?, ?, ?, ?, ?, ?, 0, 0, ?, ?, ?, ?, ?, ?)"

// BenchmarkMayRollBack reads a statement as long as the outbox's
// insert, which holds neither word (but a b): every managed statement pays this.
func BenchmarkMayRollBack(b *testing.B) {
	q := outboxInsert
	b.SetBytes(int64(len(q)))
	for b.Loop() {
		if mayRollBack(q) {
			b.Fatal("found a word the statement does not hold")
		}
	}
}

// BenchmarkClassify reads the same statement: its keyword, and the rest
// for a ';'.
func BenchmarkClassify(b *testing.B) {
	q := outboxInsert
	b.SetBytes(int64(len(q)))
	for b.Loop() {
		if classify(q) != plainStatement {
			b.Fatal("a plain statement counted as running unseen ones")
		}
	}
}

// mayRollBack finds either word, in any ASCII case, as containsFoldASCII
// finds each.
func TestMayRollBack(t *testing.T) {
	for _, q := range []string{"", "ABORT", "abort transaction", "/* x */ AbOrT", "ROLLBACK TO s1", "rollbac", "abor",
		"INSERT INTO t VALUES ('aborted')", "a", "r", "SAVEPOINT s1", "arollback", "rabort", "b", "B", "bb", "ab", "rollb",
		"INSERT INTO outbox_events (b) VALUES ('ROLLBACK')", "outbox abort", "RollBack", "ABBORT", "xxxxbbort"} {
		want := containsFoldASCII(q, "rollback") || containsFoldASCII(q, "abort")
		if got := mayRollBack(q); got != want {
			t.Errorf("mayRollBack(%q) = %v, want %v", q, got, want)
		}
	}
}

// mayRollBack agrees with containsFoldASCII at every position of either
// word in a statement.
func TestMayRollBackEveryOffset(t *testing.T) {
	base := strings.Repeat("insert into outbox (a, b) values (?, ?); ", 3)
	for _, w := range []string{"RollBack", "aBoRt"} {
		for i := 0; i <= len(base); i++ {
			s := base[:i] + w + base[i:]
			for _, cut := range []string{s, s[:i+len(w)-1]} {
				want := containsFoldASCII(cut, "rollback") || containsFoldASCII(cut, "abort")
				if got := mayRollBack(cut); got != want {
					t.Fatalf("mayRollBack(%q) = %v, want %v", cut, got, want)
				}
			}
		}
	}
}

// containsFoldASCII reports whether s contains word, written in lower-case
// ASCII letters, in any mix of ASCII upper and lower case: the plain
// scan that mayRollBack's tests check it against.
func containsFoldASCII(s, word string) bool {
	n := len(word)
	for i := 0; i+n <= len(s); i++ {
		if s[i]|0x20 != word[0] {
			continue
		}
		j := 1
		for j < n && s[i+j]|0x20 == word[j] {
			j++
		}
		if j == n {
			return true
		}
	}
	return false
}

// classify passes one statement beginning with a plain keyword, past
// white space and comments, in any case, and nothing else.
func TestClassify(t *testing.T) {
	for q, want := range map[string]bool{
		"CALL add_acct(1)":               true,
		"  call p()":                     true,
		"Call\tp":                        true,
		"EXECUTE stmt USING @a":          true,
		"execute immediate @q":           true,
		"/* app=orders */ CALL p()":      true,
		"-- note\nCALL p()":              true,
		"# note\n\texecute s":            true,
		"CALL":                           true,
		"\vCALL p()":                     true,
		"/*!CALL p()*/":                  true,
		"/*M!CALL p()*/":                 true,
		"/*+ hint */ SELECT 1":           true,
		"BEGIN NOT ATOMIC CALL p(); END": true,
		"IF 1 THEN CALL p(); END IF":     true,
		"DO 0; CALL p()":                 true,
		"SELECT 1; CALL p()":             true,
		"INSERT INTO t VALUES (1);\n-- done\nCALL p()": true,
		"PREPARE TRANSACTION 'g1'":                     true,
		"PREPARE s FROM @q":                            true,
		"ROLLBACK TO SAVEPOINT s1":                     true,
		"rollback":                                     true,
		"ABORT":                                        true,
		"DO $$ BEGIN PERFORM 1; END $$":                true,
		"(SELECT 1) UNION (SELECT 2)":                  true,
		"selectx FROM t":                               true,
		"\u00a0SELECT 1":                               true, // not ASCII white space
		"call$x":                                       true,
		"INSERT INTO calls VALUES (1)":                 false,
		"SELECT call FROM t":                           false,
		"UPDATE t SET x = 1 -- CALL p()":               false,
		"select 1;":                                    false,
		"SELECT 1 ;  \n ; ":                            false,
		"/* unterminated CALL p()":                     false,
		"-- only a comment, CALL p()":                  false,
		"":                                             false,
		"  \n ":                                        false,
		"SELECT 'CALL p()'":                            false,
		"DELETE FROM t WHERE kind = 'execute'":         false,
		"WITH x AS (SELECT 1) SELECT * FROM x":         false,
		"/* a */ /* b */\n-- c\n  Insert INTO t VALUES (1)": false,
		"SAVEPOINT s1":              false,
		"RELEASE SAVEPOINT s1":      false,
		"set @x = 1":                false,
		"Replace INTO t VALUES (1)": false,
		"CREATE TABLE t (id INT)":   true,
		"COMMIT":                    true,
		"END":                       true,
		"commit and chain":          true,
		"SET STATEMENT max_statement_time=0 FOR CALL p()": true,
		"set	statement x=1 for select 1":                  true,
		"SET statement_timeout = 0":                       false,
		"SET @statement = 1":                              false,
		"SET statementx = 1":                              false,
		"SET":                                             false,
		"SET autocommit = 0":                              true,
		"SET PASSWORD FOR u@localhost = PASSWORD('')":     true,
		"set default role none for u":                     true,
		"SET ROLE r":                                      true,
		"SET completion_type = 1":                         true,
		"SET @@session.completion_type = 'CHAIN'":         true,
		"SET NAMES utf8mb4":                               false,
		"SET @password = 1":                               false,
		"set @@session.AUTOCOMMIT=1":                      true,
		"SET SESSION autocommit = OFF":                    true,
		"LOCK TABLES t WRITE":                             true,
		"TRUNCATE t":                                      true,
		"ALTER TABLE t ADD c INT":                         true,
		"DROP TABLE t":                                    true,
		"SET /**/ STATEMENT x=1 FOR SELECT 1":             true,
		"SET -- x\nSTATEMENT x=1 FOR SELECT 1":            true,
		"SET /*! STATEMENT x=1 FOR */ SELECT 1":           true,
		"/* /* */ SELECT */ COMMIT":                       true,
		"SET /* a */ @x = 1":                              false,
		"INSERT INTO t VALUES ('a;b')":                    true, // a false alarm: the check runs
	} {
		if got := classify(q) == unseenStatement; got != want {
			t.Errorf("classify(%q) unseen = %v, want %v", q, got, want)
		}
	}
}
