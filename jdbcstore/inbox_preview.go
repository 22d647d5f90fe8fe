package jdbcstore

import (
	"context"
	"strconv"
	"strings"

	"github.com/outbox-go/outbox/internal/inboxrow"
)

var _ inboxrow.PreviewLister = (*inboxStore)(nil)

// ListPreview is List with each payload cut to its first previewBytes
// bytes in the database (SUBSTR on the binary payload column counts
// bytes on every dialect), so a page never reads whole payloads. The
// caller bounds limit and previewBytes.
func (s *inboxStore) ListPreview(ctx context.Context, status inboxrow.Status, after inboxrow.Key, limit, previewBytes int) ([]inboxrow.Record, error) {
	ts, _ := s.dialect.(TimeSelector)
	cols := make([]string, len(inboxColumns))
	for i, c := range inboxColumns {
		switch {
		case c == "payload":
			// previewBytes is an int: inlined, it cannot inject anything.
			cols[i] = "SUBSTR(payload, 1, " + strconv.Itoa(max(0, previewBytes)) + ")"
		case ts != nil && inboxTimeColumns[c]:
			cols[i] = ts.SelectTime(c)
		default:
			cols[i] = c
		}
	}
	return s.listPage(ctx, "list preview", strings.Join(cols, ", "), status, after, limit)
}
