package jdbcstore

import (
	"context"
	"strconv"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/internal/inboxrow"
)

var _ inboxrow.Lister = (*inboxStore)(nil)

// CountByStatus counts the inbox rows of each status, in one read-only
// statement.
func (s *inboxStore) CountByStatus(ctx context.Context) (map[inboxrow.Status]int, error) {
	counts := map[inboxrow.Status]int{}
	err := s.shell.eachRow(ctx, "SELECT status, COUNT(*) FROM "+s.dialect.QuoteIdent(s.table)+" GROUP BY status", nil,
		func(rows *sqlx.Rows) error {
			var st, n int
			if err := rows.Scan(&st, &n); err != nil {
				return err
			}
			counts[inboxrow.Status(st)] = n
			return nil
		})
	if err != nil {
		return nil, opErr("count by status", err)
	}
	return counts, nil
}

// List returns up to limit rows of status after the key after, in key
// order (the primary key's), in one read-only statement. The caller
// bounds limit.
func (s *inboxStore) List(ctx context.Context, status inboxrow.Status, after inboxrow.Key, limit int) ([]inboxrow.Record, error) {
	return s.listPage(ctx, "list", s.q.cols, status, after, limit)
}

// listPage reads one page of List's order selecting cols; op names the
// operation in errors.
func (s *inboxStore) listPage(ctx context.Context, op, cols string, status inboxrow.Status, after inboxrow.Key, limit int) ([]inboxrow.Record, error) {
	q := "SELECT " + cols + " FROM " + s.dialect.QuoteIdent(s.table) + " WHERE status = " + strconv.Itoa(int(status))
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
		return nil, opErr(op, err)
	}
	return recs, nil
}
