package inbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/inboxrow"
)

// errNoPreviewLister is returned by ListPreview on a store that cannot
// cut payloads (only a custom inboxrow store could be one).
var errNoPreviewLister = errors.New("outbox: inbox: the store cannot list messages with the start of their payloads")

// ListPreview is List with each Record's Payload cut to its first
// previewBytes bytes (0..MaxPayloadBytes; 0 gives empty payloads) by the
// database: a page of 1,000 messages of up to 1 MiB each is read without
// their payloads, for a list that shows their start or nothing. The cut
// may split a UTF-8 character. Arguments and order are List's.
func (in *Inbox) ListPreview(ctx context.Context, status Status, after Key, limit, previewBytes int) ([]Record, error) {
	if ctx == nil {
		return nil, core.ErrNilContext
	}
	if previewBytes < 0 || previewBytes > MaxPayloadBytes {
		return nil, &core.ConfigError{Field: "previewBytes", Msg: fmt.Sprintf("must be 0..%d, got %d", MaxPayloadBytes, previewBytes)}
	}
	if err := checkListArgs(status, after, limit); err != nil {
		return nil, err
	}
	l, ok := in.store.(inboxrow.PreviewLister)
	if !ok {
		return nil, errNoPreviewLister
	}
	rows, err := l.ListPreview(ctx, inboxrow.Status(status), inboxrow.Key(after), limit, previewBytes)
	if err != nil {
		return nil, in.mapErr(err)
	}
	out := make([]Record, len(rows))
	for i, r := range rows {
		out[i] = fromRow(r)
	}
	return out, nil
}
