package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/outbox-go/outbox/core"
)

// base64Width is the line length of a bytes payload in 'dead show'.
const base64Width = 76

func deadShowCommand() *command {
	return &command{
		name:    "show",
		args:    "ID",
		nargs:   1,
		summary: "print every field of one event",
		help: `Prints every field of the event with this id: status, type, aggregate, tenant,
times (UTC), attempts, lease, headers as key=value, the payload (a JSON payload as
its text, a bytes payload as base64) and the last error in full. Any status is
shown, not only DEAD. An unknown id is an error (exit status 1).

--json prints one object: the fields of 'dead list --json' plus headers (an object,
left out when the event has none) and, for a JSON payload, payload (the document
itself) or, for a bytes payload, payload_base64.
It is indented, but a payload that indenting would make much larger (deeply nested
arrays indent to the square of their size) is printed on one line.`,
		define: func(*flag.FlagSet) action {
			return func(ctx context.Context, s *session, args []string) error {
				store, err := s.open(ctx, false)
				if err != nil {
					return err
				}
				rec, err := store.Get(ctx, args[0])
				if errors.Is(err, core.ErrNotFound) {
					return fmt.Errorf("dead show: event %q not found in table %s", args[0], store.Table())
				}
				if err != nil {
					return missingTable(ctx, err, store)
				}
				if s.g.json {
					return writeJSON(s.stdout, toJSON(rec))
				}
				return printRecord(s.stdout, rec)
			}
		},
	}
}

// printRecord writes r for people: aligned fields, then the payload and
// the last error as blocks.
func printRecord(w io.Writer, r core.Record) error {
	tw := newTable(w)
	field := func(name, value string) { fmt.Fprintf(tw, "%s\t%s\n", name, cell(value)) }
	field("event_id", r.ID)
	field("status", r.Status.String())
	field("event_type", r.Type)
	field("aggregate_type", r.AggregateType)
	field("aggregate_id", r.AggregateID)
	field("tenant_id", r.TenantID)
	field("attempts", strconv.Itoa(r.Attempts))
	field("occurred_at", formatTimeFull(r.OccurredAt))
	field("created_at", formatTimeFull(r.CreatedAt))
	field("available_at", formatTimeFull(r.AvailableAt))
	doneName := "done_at"
	if r.Status == core.StatusDead {
		doneName = "died_at"
	}
	field(doneName, formatTimeFull(r.DoneAt))
	field("locked_by", r.LockedBy)
	field("locked_until", formatTimeFull(r.LockedUntil))
	if r.OrderKey != "" {
		field("order_key", r.OrderKey)
		field("order_seq", strconv.FormatInt(r.OrderSeq, 10))
		field("on_dead", r.OnDead.String())
	}
	headers, herr := core.DecodeHeaders(r.HeadersJSON)
	switch {
	case herr != nil:
		field("headers", "(undecodable) "+r.HeadersJSON)
	case len(headers) == 0:
		field("headers", "")
	default:
		for i, k := range slices.Sorted(maps.Keys(headers)) {
			name := ""
			if i == 0 {
				name = "headers"
			}
			fmt.Fprintf(tw, "%s\t%s=%s\n", name, cell(k), cell(headers[k]))
		}
	}
	field("payload_kind", r.PayloadKind.String())
	field("payload_size", strconv.Itoa(len(r.Payload))+" bytes")
	if r.DecodeErr != nil {
		field("decode_error", oneLine(r.DecodeErr.Error()))
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	switch {
	case r.PayloadKind == core.PayloadJSON && json.Valid(r.Payload):
		fmt.Fprintf(w, "\npayload (JSON):\n%s\n", text(string(r.Payload)))
	case len(r.Payload) == 0:
		fmt.Fprintf(w, "\npayload: (empty)\n")
	default:
		fmt.Fprintf(w, "\npayload (base64):\n%s\n", wrap(base64.StdEncoding.EncodeToString(r.Payload), base64Width))
	}
	if r.LastError == "" {
		_, err := fmt.Fprintf(w, "\nlast_error: -\n")
		return err
	}
	_, err := fmt.Fprintf(w, "\nlast_error:\n%s\n", text(r.LastError))
	return err
}

// wrap cuts s into lines of n bytes (s is ASCII).
func wrap(s string, n int) string {
	var b strings.Builder
	for len(s) > n {
		b.WriteString(s[:n])
		b.WriteByte('\n')
		s = s[n:]
	}
	b.WriteString(s)
	return b.String()
}
