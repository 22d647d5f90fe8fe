package jdbcstore

import (
	"context"
	"strconv"
	"strings"

	"github.com/jmoiron/sqlx"

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
	q := "SELECT " + strings.Join(cols, ", ") + " FROM " + s.dialect.QuoteIdent(s.table) + " WHERE status = " + strconv.Itoa(int(status))
	var args []any
	if after != (inboxrow.Key{}) {
		q += " AND (source > ? OR (source = ? AND message_id > ?))"
		args = append(args, after.Source, after.Source, after.MessageID)
	}
	q = sqlx.Rebind(s.dialect.BindType(), q+" ORDER BY source, message_id LIMIT ?")
	args = append(args, limit)
	recs, err := retryBusy(ctx, s.shell, func() ([]inboxrow.Record, error) {
		return s.scanInbox(ctx, s.db, limit, q, args...)
	})
	if err != nil {
		return nil, opErr("list preview", err)
	}
	return recs, nil
}
