package testdb

import (
	"fmt"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// recorder is a testing.TB whose Skipf and Fatalf record the message and
// end the calling goroutine, as the real ones do.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Skipf(format string, args ...any) {
	r.skipped = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// call runs fn with a recorder in its own goroutine (Skipf and Fatalf end it).
func call(t *testing.T, fn func(testing.TB)) *recorder {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(r)
	}()
	<-done
	return r
}

func TestMySQLDSNWithoutVariable(t *testing.T) {
	t.Setenv(EnvMySQLDSN, "")
	t.Setenv("CI", "")
	r := call(t, func(tb testing.TB) { MySQLDSN(tb) })
	if r.failed != "" || !strings.Contains(r.skipped, MySQLHowTo) {
		t.Errorf("without the variable: skipped %q, failed %q; want a skip naming %q", r.skipped, r.failed, MySQLHowTo)
	}
	t.Setenv("CI", "true")
	r = call(t, func(tb testing.TB) { MySQLDSN(tb) })
	if r.skipped != "" || !strings.Contains(r.failed, "CI=true") || !strings.Contains(r.failed, MySQLHowTo) {
		t.Errorf("with CI=true: skipped %q, failed %q; want a failure", r.skipped, r.failed)
	}
}

func TestMySQLUnreachableServerFails(t *testing.T) {
	t.Setenv(EnvMySQLDSN, "root@tcp(127.0.0.1:1)/test?timeout=2s")
	for _, ci := range []string{"", "true"} {
		t.Setenv("CI", ci)
		r := call(t, func(tb testing.TB) { MySQLConfig(tb) })
		if r.skipped != "" || !strings.Contains(r.failed, "cannot reach") {
			t.Errorf("CI=%q: skipped %q, failed %q; want a failure", ci, r.skipped, r.failed)
		}
	}
}

func TestInCI(t *testing.T) {
	for v, want := range map[string]bool{"": false, "true": true, "1": true, "TRUE": true, "false": false, "yes": false} {
		t.Setenv("CI", v)
		if InCI() != want {
			t.Errorf("CI=%q: InCI() = %v", v, !want)
		}
	}
}

func TestDatabaseName(t *testing.T) {
	valid := regexp.MustCompile(`^outbox_t_[a-z0-9_]*_[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for _, name := range []string{"TestX", "TestMySQLConformance/mariadb_tz0530/Insert/RoundTripsEveryField", "Test/🙂/ä b", strings.Repeat("z", 200)} {
		t.Run(name, func(t *testing.T) {
			got := databaseName(t)
			if !valid.MatchString(got) || len(got) > 64 || strings.Contains(got, "__") || seen[got] {
				t.Errorf("databaseName = %q", got)
			}
			seen[got] = true
		})
	}
}

// A database made for a test exists during the test and is gone after it.
func TestMySQLDatabaseIsDroppedAtCleanup(t *testing.T) {
	MySQLDSN(t)
	var name string
	t.Run("user", func(t *testing.T) {
		db := MySQL(t)
		if err := db.GetContext(t.Context(), &name, "SELECT DATABASE()"); err != nil || !strings.HasPrefix(name, "outbox_t_") {
			t.Fatalf("DATABASE() = %q, %v", name, err)
		}
		if _, err := db.ExecContext(t.Context(), "CREATE TABLE x (id INT PRIMARY KEY)"); err != nil {
			t.Fatal(err)
		}
	})
	if name == "" {
		t.FailNow()
	}
	db := MySQL(t)
	var n int
	if err := db.GetContext(t.Context(), &n, "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", name); err != nil || n != 0 {
		t.Errorf("database %s still exists after its test: %d, %v", name, n, err)
	}
}
