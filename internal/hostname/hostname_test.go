package hostname_test

import (
	"testing"

	"github.com/outbox-go/outbox/internal/hostname"
)

func TestEndsInNumber(t *testing.T) {
	for name, want := range map[string]bool{
		"127.0.0.01": true, "127.1": true, "0x7f.0.0.1": true, "a.0X1F": true, "a.0x": true, "256.0.0.1": true, "10.0.0.1.": true,
		"localhost": false, "host-1.example": false, "1host.example": false, "a.0xg": false, "": false, "a.": false,
	} {
		if got := hostname.EndsInNumber(name); got != want {
			t.Errorf("EndsInNumber(%q) = %v, want %v", name, got, want)
		}
	}
}
