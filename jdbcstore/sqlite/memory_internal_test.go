package sqlite

import "testing"

func TestIsSQLiteMemory(t *testing.T) {
	t.Parallel()
	cases := map[string]bool{
		":memory:":                          true,
		"file::memory:":                     true,
		"file:x?mode=memory":                true,
		"file::memory:?cache=shared":        false,
		"file:x?mode=memory&cache=shared":   false,
		"app.db":                            false,
		"file:app.db":                       false,
		"file:app.db?mode=rwc&_txlock=none": false,
	}
	for path, want := range cases {
		if got := isMemory(path); got != want {
			t.Errorf("isMemory(%q) = %v, want %v", path, got, want)
		}
	}
}
