package inbox

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/outbox-go/outbox/core"
)

// Limits of the stored fields.
const (
	// MaxIDLen is the longest message id, source and topic, in characters.
	MaxIDLen = 255
	// MaxPayloadBytes is the largest payload, in bytes: the outbox's
	// core.MaxPayloadBytes (1 MiB), well within what every supported
	// database takes in one statement (MySQL's and MariaDB's
	// max_allowed_packet among them).
	MaxPayloadBytes = core.MaxPayloadBytes
	// MaxHashLen is the longest content hash, in bytes (a SHA-256 digest
	// is 32).
	MaxHashLen = 1024
	// MaxOwnerLen is the longest owner token, in bytes.
	MaxOwnerLen = core.MaxOwnerLen
)

func invalid(field string, err error, msg string) error {
	return &core.ValidationError{Field: field, Err: err, Msg: msg}
}

// checkText enforces a non-empty (unless optional), clean text of at most
// MaxIDLen characters.
func checkText(field, s string, optional bool, empty, tooLong error) error {
	if s == "" {
		if optional {
			return nil
		}
		return invalid(field, empty, "")
	}
	if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
		return invalid(field, ErrInvalidText, "")
	}
	if len(s) > MaxIDLen {
		if n := utf8.RuneCountInString(s); n > MaxIDLen {
			return invalid(field, tooLong, fmt.Sprintf("%d characters, limit %d", n, MaxIDLen))
		}
	}
	return nil
}

func checkKey(source, messageID string) error {
	if err := checkText("message_id", messageID, false, ErrEmptyMessageID, ErrMessageIDTooLong); err != nil {
		return err
	}
	return checkText("source", source, false, ErrEmptySource, ErrSourceTooLong)
}

// checkKeys checks every key of a call that acts on messages by key
// before any statement runs, so one bad key refuses the whole call (a
// database may fail the statement on it, PostgreSQL on invalid UTF-8 or
// NUL, and the call's valid keys with it). The field names the key:
// "keys[2].source".
func checkKeys(keys []Key) error {
	for i, k := range keys {
		if err := checkKey(k.Source, k.MessageID); err != nil {
			if ve, ok := err.(*core.ValidationError); ok {
				ve.Field = fmt.Sprintf("keys[%d].%s", i, ve.Field)
			}
			return err
		}
	}
	return nil
}

func checkHash(h []byte) error {
	if len(h) > MaxHashLen {
		return invalid("hash", ErrHashTooLong, fmt.Sprintf("%d bytes, limit %d", len(h), MaxHashLen))
	}
	return nil
}

// checkMessage validates a message for Enqueue (forQueue: topic and
// payload required) or for ProcessTx (topic optional, payload may be nil).
func checkMessage(m Message, forQueue bool) error {
	if err := checkKey(m.Source, m.MessageID); err != nil {
		return err
	}
	if err := checkText("topic", m.Topic, !forQueue, ErrEmptyTopic, ErrTopicTooLong); err != nil {
		return err
	}
	if forQueue && m.Payload == nil {
		return invalid("payload", ErrNilPayload, "use []byte{} for an empty payload")
	}
	if len(m.Payload) > MaxPayloadBytes {
		return invalid("payload", ErrPayloadTooLarge, fmt.Sprintf("%d bytes, limit %d", len(m.Payload), MaxPayloadBytes))
	}
	if forQueue && !m.DueAt.IsZero() {
		if y := m.DueAt.UTC().Year(); y < core.MinTimeYear || y > core.MaxTimeYear {
			return invalid("due_at", ErrDueAtOutOfRange, fmt.Sprintf("year %d in UTC, must be %d to %d", y, core.MinTimeYear, core.MaxTimeYear))
		}
	}
	return checkHash(m.Hash)
}

func checkOwner(owner string) error {
	if owner == "" {
		return invalid("owner", ErrEmptyOwner, "")
	}
	if len(owner) > MaxOwnerLen || !utf8.ValidString(owner) || strings.IndexByte(owner, 0) >= 0 {
		return invalid("owner", ErrInvalidOwner, fmt.Sprintf("must be valid text of at most %d bytes", MaxOwnerLen))
	}
	return nil
}

func checkPositive(field string, d time.Duration, err error) error {
	if d <= 0 {
		return invalid(field, err, fmt.Sprintf("got %v", d))
	}
	return nil
}

func checkBatch(n int) error {
	if n <= 0 {
		return invalid("batch_size", ErrInvalidBatchSize, fmt.Sprintf("got %d", n))
	}
	return nil
}
