package inboxrow

import "context"

// Lister is implemented by stores that can list their rows for
// operators (the jdbcstore inbox store does): package inbox type-asserts
// it, so Store itself stays as it is.
type Lister interface {
	// CountByStatus counts the rows of each status; statuses without rows
	// are absent.
	CountByStatus(ctx context.Context) (map[Status]int, error)
	// List returns up to limit rows of status whose key sorts after
	// after (the zero Key for the first page), ordered by source, then
	// message id, byte for byte.
	List(ctx context.Context, status Status, after Key, limit int) ([]Record, error)
}
