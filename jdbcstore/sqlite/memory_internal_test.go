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
		"file:%3Amemory%3A":                 true,
		"file:x.db?mode=rwc&mode=memory":    true,
		"file:x.db?mode=memory&mode=rwc":    false,
		"file:#frag":                        true,
		"file:x.db#frag":                    false,
		"file:x.db?cache=shared&cache=private&mode=memory": true,
	}
	for path, want := range cases {
		if got := isMemory(path); got != want {
			t.Errorf("isMemory(%q) = %v, want %v", path, got, want)
		}
	}
}
