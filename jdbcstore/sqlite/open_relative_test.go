package sqlite_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/outbox-go/outbox/jdbcstore/sqlite"
)

// Open keeps to the file a relative path named when it was called: a
// connection the pool opens after the process changed its working
// directory opens that file, not a new empty database in the new
// directory ("no such table" at the first publish, a stray file left).
func TestOpenRelativePathSurvivesChdir(t *testing.T) {
	first, second := t.TempDir(), t.TempDir()
	t.Chdir(first)
	db, err := sqlite.Open("app.db")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxIdleConns(0) // every statement on a new connection
	if _, err := db.Exec(`CREATE TABLE t (n INTEGER)`); err != nil {
		t.Fatal(err)
	}
	t.Chdir(second)
	if _, err := db.Exec(`INSERT INTO t VALUES (1)`); err != nil {
		t.Fatalf("insert on a connection opened after chdir: %v", err)
	}
	if _, err := os.Stat(filepath.Join(second, "app.db")); !os.IsNotExist(err) {
		t.Errorf("a database file was created in the new working directory: %v", err)
	}
}
