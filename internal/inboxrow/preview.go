package inboxrow

import "context"

// PreviewLister is implemented by stores that can list their rows with
// the start of their payloads only (the jdbcstore inbox store does).
type PreviewLister interface {
	// ListPreview is Lister.List with each Payload cut to its first
	// previewBytes bytes (empty for 0) by the database: the rest is
	// never read.
	ListPreview(ctx context.Context, status Status, after Key, limit, previewBytes int) ([]Record, error)
}
