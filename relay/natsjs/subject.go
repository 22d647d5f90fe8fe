package natsjs

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
)

// ErrInvalidSubject reports a subject that breaks the NATS subject rules:
// an expanded Config.Subject or a SubjectFunc result. An event with such
// a subject fails normally (retried, DEAD after MaxAttempts): no broker
// outage is involved.
var ErrInvalidSubject = errors.New("natsjs: invalid subject")

// maxSubjectBytes bounds a published subject. nats-server refuses a
// publish whose protocol line (subject, reply subject and sizes, about 60
// bytes besides the subject) is longer than its max_control_line, 4096
// bytes by default, by closing the client's connection, which nats.go then
// closes for good (no reconnect, whatever MaxReconnects): one event with
// such a subject would leave the relay without a connection, every event
// put off for ever.
const maxSubjectBytes = 4000

// maxControlLine is nats-server's default max_control_line, and
// publishLineBytes what a publish line holds besides its subject and
// reply subject ("HPUB", the header and total sizes, separators, CRLF).
const (
	maxControlLine   = 4096
	publishLineBytes = 29
)

// maxSubjectOn is the longest subject a relay over nc publishes: at most
// maxSubjectBytes, less with an inbox prefix of the connection's own
// (nats.CustomInboxPrefix) long enough that the reply subject, made from
// it, would take the publish line past max_control_line. (A 3,950-byte
// subject with a 200-byte prefix closed the connection for good.)
func maxSubjectOn(nc *nats.Conn) int {
	if nc == nil {
		return maxSubjectBytes
	}
	return min(maxSubjectBytes, maxControlLine-publishLineBytes-len(nc.NewRespInbox()))
}

// ValidateSubject checks subject against the rules of a NATS publish
// subject: not empty, at most 4000 bytes (nats-server closes the
// connection of a client whose publish line exceeds its max_control_line,
// 4096 bytes by default, and nats.go does not reconnect it; a relay whose
// connection has a long inbox prefix, nats.CustomInboxPrefix, takes less,
// since the reply subject shares the line), valid UTF-8,
// tokens separated by '.' and none of them empty, no whitespace or control character, no wildcard
// character ('*' or '>'), which JetStream refuses in a published subject,
// and a first token that is not reserved for the server's APIs (one that
// starts with '$', such as $JS.API, or _INBOX): an event field at the
// start of a template could otherwise purge or delete a stream.
// It returns an error wrapping [ErrInvalidSubject] that names the rule.
func ValidateSubject(subject string) error {
	if subject == "" {
		return fmt.Errorf("%w: empty", ErrInvalidSubject)
	}
	if len(subject) > maxSubjectBytes {
		return fmt.Errorf("%w: %d bytes, longer than %d (nats-server's max_control_line, 4096 bytes by default, bounds the publish line)",
			ErrInvalidSubject, len(subject), maxSubjectBytes)
	}
	if !utf8.ValidString(subject) {
		return fmt.Errorf("%w %q: not valid UTF-8", ErrInvalidSubject, subject)
	}
	for i, r := range subject {
		switch {
		case unicode.IsSpace(r) || unicode.IsControl(r):
			return fmt.Errorf("%w %q: whitespace or control character at offset %d", ErrInvalidSubject, subject, i)
		case r == '*' || r == '>':
			return fmt.Errorf("%w %q: wildcard %q at offset %d (a published subject must be literal)", ErrInvalidSubject, subject, r, i)
		}
	}
	if strings.HasPrefix(subject, ".") || strings.HasSuffix(subject, ".") || strings.Contains(subject, "..") {
		return fmt.Errorf("%w %q: empty token (a leading, trailing or doubled '.'; is a template field empty?)", ErrInvalidSubject, subject)
	}
	if first, _, _ := strings.Cut(subject, "."); strings.HasPrefix(first, "$") || first == "_INBOX" {
		// $JS.API.STREAM.PURGE.<stream> purges a stream: an event type
		// or id must never reach the server's own APIs through a
		// template that starts with a field.
		return fmt.Errorf("%w %q: its first token %q is reserved for the server's APIs ('$' subjects, _INBOX)", ErrInvalidSubject, subject, first)
	}
	return nil
}

// validateStreamName checks a stream name as JetStream does: not empty, no
// whitespace, '.', '*', '>', path separators or control characters.
func validateStreamName(name string) error {
	if strings.ContainsFunc(name, func(r rune) bool {
		return unicode.IsSpace(r) || unicode.IsControl(r) || strings.ContainsRune(".*>/\\", r)
	}) {
		return fmt.Errorf("stream name %q must not contain whitespace, '.', '*', '>', '/' or '\\'", name)
	}
	return nil
}
