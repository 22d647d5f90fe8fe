package dashboard

import (
	"strings"
	"testing"
)

// A text payload cut within a character at inboxPayloadRead bytes is
// still shown as text.
func TestPayloadPreviewOfACutCharacter(t *testing.T) {
	p := []byte("a" + strings.Repeat("é", inboxPayloadRead/2)) // the cut splits the 400th é
	got := payloadPreview(p[:inboxPayloadRead])
	if want := "a" + strings.Repeat("é", inboxPayloadShown-1) + "…"; got != want {
		t.Errorf("payloadPreview = %q, want %q", got, want)
	}
	if got := payloadPreview([]byte{0xff, 0, 1}); got != "base64:/wAB" {
		t.Errorf("payloadPreview of bytes = %q", got)
	}
}
