package ident_test

import (
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
