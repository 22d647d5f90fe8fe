package ident_test

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/ident"
)

func TestOwnerToken(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		tok := ident.OwnerToken()
		if tok == "" || len(tok) > core.MaxOwnerLen || !utf8.ValidString(tok) {
			t.Fatalf("OwnerToken() = %q (%d bytes), want 1 to %d bytes of text", tok, len(tok), core.MaxOwnerLen)
		}
		for _, r := range tok {
			if r < 0x21 || r > 0x7e {
				t.Fatalf("OwnerToken() = %q contains %q, want printable ASCII only", tok, r)
			}
		}
		if seen[tok] {
			t.Fatalf("OwnerToken() repeated %q", tok)
		}
		seen[tok] = true
	}
}

// Store ids are text without control characters: C0, DEL and the C1
// range (U+0080–U+009F, NEL and CSI among them) are all refused.
func TestValidateStoreID(t *testing.T) {
	for _, id := range []string{"a", "tenant-42", "é€😀", strings.Repeat("a", ident.MaxStoreIDLen)} {
		if err := ident.ValidateStoreID(id); err != nil {
			t.Errorf("ValidateStoreID(%q) = %v, want nil", id, err)
		}
	}
	for _, id := range []string{"", "a\tb", "a\nb", "a\x7fb", "a\u0085b", "a\u009bb", "\xff", strings.Repeat("a", ident.MaxStoreIDLen+1)} {
		if err := ident.ValidateStoreID(id); !errors.Is(err, core.ErrInvalidConfig) {
			t.Errorf("ValidateStoreID(%q) = %v, want ErrInvalidConfig", id, err)
		}
	}
}
