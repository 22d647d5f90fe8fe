package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/jsonindent"
	"github.com/outbox-go/outbox/jdbcstore"
)

// writeJSON prints v as one indented JSON document. Indentation grows
// with the nesting depth (a payload of nested arrays indents to the
// square of its size), so a document that would indent to more than
// maxIndentFactor times its size is indented only to maxIndentDepth
// levels, deeper values (a payload's content) written on one line.
func writeJSON(w io.Writer, v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	doc := bytes.TrimSuffix(b.Bytes(), []byte("\n"))
	out, ok := jsonindent.Indent(doc, "  ", 0, maxIndentFactor*len(doc)+64<<10)
	if !ok {
		// At most (2 + 2 × 2) × len(doc) bytes.
		out, _ = jsonindent.Indent(doc, "  ", maxIndentDepth, 0)
	}
	_, err := w.Write(append(out, '\n'))
	return err
}

// Bounds of writeJSON's indentation.
const (
	maxIndentFactor = 4
	// maxIndentDepth puts the fields of an object, and those of the
	// objects of an array (dead list), one a line.
	maxIndentDepth = 2
)

// newTable returns a writer aligning tab-separated cells; Flush it.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
}

// row writes cells as one table line, each made safe by cell.
func row(w io.Writer, cells ...string) {
	for i, c := range cells {
		if i > 0 {
			io.WriteString(w, "\t")
		}
		io.WriteString(w, cell(c))
	}
	io.WriteString(w, "\n")
}

// cell makes s safe for one table cell on a terminal: control characters
// (newlines and tabs included), invisible format characters and invalid
// UTF-8 are written as escapes; "" becomes "-".
func cell(s string) string {
	if s == "" {
		return "-"
	}
	return escape(s, false)
}

// text makes s safe to print on a terminal as several lines: like cell,
// but newlines and tabs stay.
func text(s string) string { return escape(s, true) }

func escape(s string, keepLines bool) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	return escaped(s, keepLines, false)
}

// escaped writes s with its bytes that are not UTF-8 and its characters
// that are not printable escaped, newlines and tabs kept with keepLines.
// With shell it writes the inside of a shell's ANSI-C quoting ($'…'):
// backslashes and single quotes escaped too, and every escape of a byte
// (a shell reads \xHH the same in every locale, \uHHHH only in a UTF-8
// one).
func escaped(s string, keepLines, shell bool) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case shell && (r == '\\' || r == '\''):
			b.WriteByte('\\')
			b.WriteRune(r)
		case keepLines && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x80 && !unicode.IsPrint(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case !unicode.IsPrint(r) && r != ' ' && shell:
			for _, c := range []byte(s[i : i+size]) {
				fmt.Fprintf(&b, `\x%02x`, c)
			}
		case !unicode.IsPrint(r) && r != ' ':
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
		i += size
	}
	return b.String()
}

// truncate shortens s to at most n characters, marking a cut with "…".
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	runes := []rune(s)
	return string(runes[:n-1]) + "…"
}

// oneLine joins the lines of an error message with "; ".
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	s = strings.ReplaceAll(s, "\r\n", "\n")
	return escape(strings.ReplaceAll(s, "\n", "; "), false)
}

// formatTime writes t in UTC to the second, or "-" for the zero time.
func formatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// formatTimeFull writes t in UTC with its fraction, or "-".
func formatTimeFull(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// jsonTime is t for JSON: RFC 3339 in UTC, or null for the zero time.
func jsonTime(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := t.UTC().Format(time.RFC3339Nano)
	return &s
}

// rawTime is jsonTime as a JSON value: a string, or null.
func rawTime(t time.Time) json.RawMessage {
	b, _ := json.Marshal(jsonTime(t)) // a *string always marshals
	return b
}

// formatLag rounds d for people: to the millisecond under a minute, to
// the second above, with days above 24h.
func formatLag(d time.Duration) string {
	if d >= time.Minute {
		return formatAge(d.Round(time.Second))
	}
	return d.Round(time.Millisecond).String()
}

// plainArg matches command-line arguments that need no shell quoting.
var plainArg = regexp.MustCompile(`^[A-Za-z0-9_./:@%+=,-]+$`)

// shellQuote returns s as one shell word, safe to print on a terminal. A
// word with characters a terminal must not get raw (control characters,
// bytes that are not UTF-8) is written in ANSI-C quoting, $'…' (bash,
// zsh, ksh), with those characters escaped: the shell turns it back into
// s.
func shellQuote(s string) string {
	switch {
	case plainArg.MatchString(s):
		return s
	case escape(s, false) == s:
		return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
	}
	return "$'" + escaped(s, false, true) + "'"
}

// recordJSON is an event for --json. Times are RFC 3339 in UTC, null when
// unset. When the event finished is done_at, or died_at for a DEAD event
// (the store's done_at column, named as in the tables), never both. A JSON
// payload is embedded as the document itself, a bytes payload as standard
// base64 in payload_base64. dead list, which reads no payloads, leaves out
// the headers, the payload and payload_size.
type recordJSON struct {
	ID            string            `json:"event_id"`
	Type          string            `json:"event_type"`
	Status        string            `json:"status"`
	AggregateType string            `json:"aggregate_type"`
	AggregateID   string            `json:"aggregate_id"`
	TenantID      string            `json:"tenant_id"`
	Attempts      int               `json:"attempts"`
	OccurredAt    *string           `json:"occurred_at"`
	CreatedAt     *string           `json:"created_at"`
	AvailableAt   *string           `json:"available_at"`
	DoneAt        json.RawMessage   `json:"done_at,omitempty"` // a time or null; absent for DEAD
	DiedAt        json.RawMessage   `json:"died_at,omitempty"` // a time or null; DEAD only
	LastError     string            `json:"last_error"`
	LockedBy      string            `json:"locked_by"`
	LockedUntil   *string           `json:"locked_until"`
	OrderKey      string            `json:"order_key,omitempty"` // ordered events only
	OrderSeq      int64             `json:"order_seq,omitempty"`
	OnDead        string            `json:"on_dead,omitempty"` // "block" or "skip"
	Headers       map[string]string `json:"headers,omitempty"`
	HeadersRaw    string            `json:"headers_raw,omitempty"`
	PayloadKind   string            `json:"payload_kind"`
	PayloadSize   *int              `json:"payload_size,omitempty"` // dead show only: dead list reads no payload
	Payload       json.RawMessage   `json:"payload,omitempty"`
	PayloadBase64 *string           `json:"payload_base64,omitempty"`
	DecodeError   string            `json:"decode_error,omitempty"`
}

// toJSON converts r, its headers and payload included.
func toJSON(r core.Record) recordJSON {
	size := len(r.Payload)
	j := recordJSON{
		ID: r.ID, Type: r.Type, Status: r.Status.String(),
		AggregateType: r.AggregateType, AggregateID: r.AggregateID, TenantID: r.TenantID,
		Attempts:   r.Attempts,
		OccurredAt: jsonTime(r.OccurredAt), CreatedAt: jsonTime(r.CreatedAt),
		AvailableAt: jsonTime(r.AvailableAt),
		LastError:   r.LastError, LockedBy: r.LockedBy, LockedUntil: jsonTime(r.LockedUntil),
		PayloadKind: r.PayloadKind.String(), PayloadSize: &size,
	}
	if r.Status == core.StatusDead {
		j.DiedAt = rawTime(r.DoneAt)
	} else {
		j.DoneAt = rawTime(r.DoneAt)
	}
	if r.OrderKey != "" {
		j.OrderKey, j.OrderSeq, j.OnDead = r.OrderKey, r.OrderSeq, r.OnDead.String()
	}
	if r.DecodeErr != nil {
		j.DecodeError = r.DecodeErr.Error()
	}
	if h, err := core.DecodeHeaders(r.HeadersJSON); err == nil {
		j.Headers = h
	} else {
		j.HeadersRaw = r.HeadersJSON
	}
	if r.PayloadKind == core.PayloadJSON && json.Valid(r.Payload) {
		j.Payload = json.RawMessage(r.Payload)
	} else if r.Payload != nil || r.PayloadKind == core.PayloadBytes {
		b := base64.StdEncoding.EncodeToString(r.Payload)
		j.PayloadBase64 = &b
	}
	return j
}

// summaryJSON converts a DEAD event read without its payload and headers:
// the fields of toJSON but those and payload_size.
func summaryJSON(r jdbcstore.DeadSummary) recordJSON {
	j := recordJSON{
		ID: r.ID, Type: r.Type, Status: core.StatusDead.String(),
		AggregateType: r.AggregateType, AggregateID: r.AggregateID, TenantID: r.TenantID,
		Attempts:   r.Attempts,
		OccurredAt: jsonTime(r.OccurredAt), CreatedAt: jsonTime(r.CreatedAt),
		AvailableAt: jsonTime(r.AvailableAt), DiedAt: rawTime(r.DiedAt),
		LastError: r.LastError, LockedBy: r.LockedBy, LockedUntil: jsonTime(r.LockedUntil),
		PayloadKind: r.PayloadKind.String(),
	}
	if r.OrderKey != "" {
		j.OrderKey, j.OrderSeq, j.OnDead = r.OrderKey, r.OrderSeq, r.OnDead.String()
	}
	if r.DecodeErr != nil {
		j.DecodeError = r.DecodeErr.Error()
	}
	return j
}
