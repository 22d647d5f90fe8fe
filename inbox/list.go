package inbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/inboxrow"
)

// MaxListLimit bounds one page of List and ListPreview.
const MaxListLimit = 1000

// errNoLister is returned by CountByStatus and List on a store that
// cannot list (only a custom inboxrow store could be one).
var errNoLister = errors.New("outbox: inbox: the store cannot list messages")

// CountByStatus returns how many messages the table holds in each
// status; statuses without rows are absent. One read-only statement.
func (in *Inbox) CountByStatus(ctx context.Context) (map[Status]int, error) {
	if ctx == nil {
		return nil, core.ErrNilContext
	}
	l, ok := in.store.(inboxrow.Lister)
	if !ok {
		return nil, errNoLister
	}
	rows, err := l.CountByStatus(ctx)
	if err != nil {
		return nil, in.mapErr(err)
	}
	out := make(map[Status]int, len(rows))
	for s, n := range rows {
		out[Status(s)] = n
	}
	return out, nil
}

// List returns up to limit (1..MaxListLimit) messages of status whose key
// sorts after after (the zero Key for the first page), ordered by source,
// then message id, byte for byte: pass the key of the last message of a
// page as after to get the next. StatusDead lists the messages that
// failed for good, StatusProcessing the ones queued for a handler. One
// read-only statement.
func (in *Inbox) List(ctx context.Context, status Status, after Key, limit int) ([]Record, error) {
	if ctx == nil {
		return nil, core.ErrNilContext
	}
	if err := checkListArgs(status, after, limit); err != nil {
		return nil, err
	}
	l, ok := in.store.(inboxrow.Lister)
	if !ok {
		return nil, errNoLister
	}
	rows, err := l.List(ctx, inboxrow.Status(status), inboxrow.Key(after), limit)
	if err != nil {
		return nil, in.mapErr(err)
	}
	out := make([]Record, len(rows))
	for i, r := range rows {
		out[i] = fromRow(r)
	}
	return out, nil
}

// checkListArgs validates the arguments List and ListPreview share.
func checkListArgs(status Status, after Key, limit int) error {
	if limit < 1 || limit > MaxListLimit {
		return &core.ConfigError{Field: "limit", Msg: fmt.Sprintf("must be 1..%d, got %d", MaxListLimit, limit)}
	}
	if status < StatusSeen || status > StatusDead {
		return &core.ConfigError{Field: "status", Msg: fmt.Sprintf("must be Seen, Processing, Done or Dead, got %d", status)}
	}
	if after != (Key{}) {
		return checkKey(after.Source, after.MessageID)
	}
	return nil
}
