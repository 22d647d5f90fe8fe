package relay

import (
	"errors"
	"fmt"
	"strings"

	"github.com/outbox-go/outbox/core"
)

// ErrInvalidTemplate reports a template that cannot be parsed: an unknown
// placeholder, or a brace that opens or closes nothing.
var ErrInvalidTemplate = errors.New("outbox/relay: invalid template")

// Placeholders a [Template] can hold, each replaced by a field of the
// event.
const (
	PlaceholderType          = "{type}"           // Envelope.Type
	PlaceholderAggregateType = "{aggregate_type}" // Envelope.AggregateType
	PlaceholderAggregateID   = "{aggregate_id}"   // Envelope.AggregateID
	PlaceholderTenant        = "{tenant}"         // Envelope.TenantID
	PlaceholderID            = "{id}"             // Envelope.ID
)

// field is one part of a parsed template: a literal, or an event field.
type field uint8

const (
	literal field = iota
	fieldType
	fieldAggregateType
	fieldAggregateID
	fieldTenant
	fieldID
)

var placeholders = map[string]field{
	PlaceholderType:          fieldType,
	PlaceholderAggregateType: fieldAggregateType,
	PlaceholderAggregateID:   fieldAggregateID,
	PlaceholderTenant:        fieldTenant,
	PlaceholderID:            fieldID,
}

type part struct {
	f   field
	lit string
}

// Template builds a broker destination (a NATS subject, an AMQP routing
// key or exchange) from an event: literal text with placeholders such as
// "orders.{type}" or "{tenant}.{aggregate_type}.{aggregate_id}". The
// placeholders are the Placeholder* constants; any other brace is an
// error. An empty field expands to the empty string: the relay checks the
// result against its broker's rules. A field's value goes in as it is: a
// '.' in it adds tokens to a NATS subject or words to an AMQP topic
// routing key, so a tenant id "acme.mallory" in "events.{tenant}.{type}"
// matches a filter "events.acme.>"; refuse dots in ids that come from
// outside, or build the destination yourself. The zero Template expands
// to "".
type Template struct {
	src   string
	parts []part
}

// ParseTemplate parses s. It returns an error wrapping
// [ErrInvalidTemplate] for an unknown placeholder or an unmatched brace.
func ParseTemplate(s string) (Template, error) {
	t := Template{src: s}
	rest := s
	for rest != "" {
		open := strings.IndexAny(rest, "{}")
		if open < 0 {
			t.parts = append(t.parts, part{lit: rest})
			break
		}
		if rest[open] == '}' {
			return Template{}, fmt.Errorf("%w %q: '}' at offset %d closes nothing", ErrInvalidTemplate, s, len(s)-len(rest)+open)
		}
		if open > 0 {
			t.parts = append(t.parts, part{lit: rest[:open]})
		}
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			return Template{}, fmt.Errorf("%w %q: '{' at offset %d is not closed", ErrInvalidTemplate, s, len(s)-len(rest)+open)
		}
		name := rest[open : open+end+1]
		f, ok := placeholders[name]
		if !ok {
			return Template{}, fmt.Errorf("%w %q: unknown placeholder %s (known: %s, %s, %s, %s, %s)", ErrInvalidTemplate, s, name,
				PlaceholderType, PlaceholderAggregateType, PlaceholderAggregateID, PlaceholderTenant, PlaceholderID)
		}
		t.parts = append(t.parts, part{f: f})
		rest = rest[open+end+1:]
	}
	return t, nil
}

// MustParseTemplate is like [ParseTemplate] but panics on an error; for
// templates fixed in the program's source.
func MustParseTemplate(s string) Template {
	t, err := ParseTemplate(s)
	if err != nil {
		panic(err)
	}
	return t
}

// String returns the template's source text.
func (t Template) String() string { return t.src }

// IsZero reports whether t is the zero Template.
func (t Template) IsZero() bool { return t.src == "" }

// Static reports whether t holds no placeholder: it expands to the same
// text for every event.
func (t Template) Static() bool {
	for _, p := range t.parts {
		if p.f != literal {
			return false
		}
	}
	return true
}

// Expand returns the template with each placeholder replaced by env's
// field.
func (t Template) Expand(env core.Envelope) string {
	if len(t.parts) == 1 && t.parts[0].f == literal {
		return t.parts[0].lit
	}
	var b strings.Builder
	for _, p := range t.parts {
		switch p.f {
		case literal:
			b.WriteString(p.lit)
		case fieldType:
			b.WriteString(env.Type())
		case fieldAggregateType:
			b.WriteString(env.AggregateType())
		case fieldAggregateID:
			b.WriteString(env.AggregateID())
		case fieldTenant:
			b.WriteString(env.TenantID())
		case fieldID:
			b.WriteString(env.ID())
		}
	}
	return b.String()
}
