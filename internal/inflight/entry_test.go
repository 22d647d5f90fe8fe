package inflight

import (
	"testing"
	"unsafe"
)

// The tracker's map holds an entry per event in flight: it stays as small
// as a time.Time alone, with or without a TTL.
func TestEntrySize(t *testing.T) {
	if got := unsafe.Sizeof(entry{}); got != 24 {
		t.Fatalf("entry is %d bytes, want 24", got)
	}
}
