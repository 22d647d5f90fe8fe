package jdbcstore

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/outbox-go/outbox/core"
)

// mapError is the one place where driver errors become store errors: a
// duplicate key wraps core.ErrDuplicateEvent, everything keeps the driver
// error in its chain.
func (s *Store) mapError(op, id string, err error) error {
	if id != "" {
		op += fmt.Sprintf(" %q", id)
	}
	if s.dialect.Classify(err) == ClassDuplicate {
		return fmt.Errorf("outbox: jdbcstore: %s: %w: %w", op, core.ErrDuplicateEvent, err)
	}
	return fmt.Errorf("outbox: jdbcstore: %s: %w", op, err)
}

// truncateError returns msg as valid UTF-8 without NUL bytes (invalid
// sequences and NULs become U+FFFD, which every database stores in a text
// column), cut to at most max characters.
func truncateError(msg string, max int) string {
	if !utf8.ValidString(msg) {
		msg = strings.ToValidUTF8(msg, "\uFFFD")
	}
	if strings.IndexByte(msg, 0) >= 0 {
		msg = strings.ReplaceAll(msg, "\x00", "\uFFFD")
	}
	if len(msg) <= max { // bytes bound runes
		return msg
	}
	n := 0
	for i := range msg {
		if n == max {
			return msg[:i]
		}
		n++
	}
	return msg
}

// storable reports whether text could be in a text column of every
// supported database: valid UTF-8 without NUL. PostgreSQL refuses any
// other text as a parameter (SQLSTATE 22021), so a lookup by it fails
// there where the other databases find nothing: callers look up such
// text as matching no row.
func storable(text string) bool {
	return utf8.ValidString(text) && strings.IndexByte(text, 0) < 0
}
