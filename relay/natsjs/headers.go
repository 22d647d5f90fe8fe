package natsjs

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/nats-io/nats.go"

	"github.com/outbox-go/outbox/relay"
)

// HeaderEncoded is the header that carries, as one JSON object of names to
// values, the headers NATS cannot carry verbatim. NATS headers are
// MIME-like: nats.go refuses a message with a header name that holds
// anything but visible ASCII (a space, a non-ASCII letter) or one of
// "(),/:;<=>?@[\]{} (a colon), turns CR and LF in a value into spaces and
// trims the spaces and tabs around it. Every other header, such as "traceparent" or
// "Outbox-Aggregate-Id" with an ordinary value, goes as a NATS header of
// its own, unchanged; a header that would be refused or changed goes
// inside HeaderEncoded instead, so it reaches the consumer exactly. The
// relay adds HeaderEncoded only to a message with such a header;
// [DecodeHeaders] puts its headers back. Its value is printable ASCII
// (every other character escaped as JSON's \uXXXX), which any NATS client
// reads unchanged. An event header named HeaderEncoded travels inside it
// too, so it does not clash with the relay's. So do the headers Status and
// Description (in any case) of an event with an empty payload: NATS
// clients take such a message for a status of the server's (nats.go's
// JetStream consumers never hand it over).
const HeaderEncoded = "Outbox-Encoded-Headers"

// ErrEncodedHeaders reports a [HeaderEncoded] header that [DecodeHeaders]
// cannot read: more than one value, or a value that is not a JSON object
// of strings. The relay never writes one.
var ErrEncodedHeaders = errors.New("natsjs: malformed " + HeaderEncoded + " header")

// headerNameChars marks the bytes nats.go (v1.53) accepts in a header name:
// visible ASCII (33 to 126) except "(),/:;<=>?@[\]{}. A message with
// any other byte in a name is refused by nats.go before it is sent
// ("nats: message could not decode headers").
var headerNameChars = func() (set [256]bool) {
	for c := byte(33); c <= 126; c++ {
		set[c] = !strings.ContainsRune(`"(),/:;<=>?@[\]{}`, rune(c))
	}
	return set
}()

// verbatim reports whether a consumer receives the header name: value
// exactly as the relay sets it in a NATS message, by the rules of nats.go
// (v1.53), which writes and parses the headers: name must pass its check
// (not empty, visible ASCII without any of "(),/:;<=>?@[\]{}), or the
// message is not sent at all; value must hold no CR or LF, which it turns
// into spaces, and neither start nor end with a space or a tab, which it
// trims (and its parser skips the spaces after the colon). Any other byte
// of a value, non-ASCII text and control characters included, travels
// unchanged. [HeaderEncoded] itself is not verbatim, so an event header of
// that name does not clash with the relay's.
//
// A name or value that mentions "Nats-" (in any case) is not verbatim
// either: nats-server finds JetStream's control headers (Nats-Msg-Id,
// Nats-Expected-Last-Sequence, Nats-Rollup, ...) by searching the text of
// the whole header block, so such text in another header's name or value
// could be taken for one (a value holding "Nats-Msg-Id: x" turned off the
// message's duplicate detection on nats-server 2.9).
func verbatim(name, value string) bool {
	if name == "" || name == HeaderEncoded || mentionsNATS(name) {
		return false
	}
	for i := 0; i < len(name); i++ {
		if !headerNameChars[name[i]] {
			return false
		}
	}
	return verbatimValue(value)
}

// verbatimValue is verbatim's rule for a header value.
func verbatimValue(value string) bool {
	if strings.ContainsAny(value, "\r\n") || mentionsNATS(value) {
		return false
	}
	if value != "" {
		if c := value[0]; c == ' ' || c == '\t' {
			return false
		}
		if c := value[len(value)-1]; c == ' ' || c == '\t' {
			return false
		}
	}
	return true
}

// mentionsNATS reports whether s holds "nats-" in any case.
func mentionsNATS(s string) bool {
	for i := strings.IndexByte(s, '-'); i >= 0; {
		if i >= 4 && strings.EqualFold(s[i-4:i], "nats") {
			return true
		}
		next := strings.IndexByte(s[i+1:], '-')
		if next < 0 {
			break
		}
		i += 1 + next
	}
	return false
}

// headerSetter collects the headers of one message: a verbatim header
// straight into the message, any other one into the encoded set. A later
// set of a name replaces the earlier one, wherever it went.
type headerSetter struct {
	msg *nats.Msg
	enc map[string]string // nil until a header needs it
	// empty: the message has no payload, so a Status header would make
	// it look like a server status (see statusLike).
	empty bool
}

// statusLike reports whether a header named k, on a message without
// payload, makes the message look like a status the server sends a
// consumer (nats.go's JetStream consumers read "Status" and
// "Description" on such a message, and take "404" for "no messages",
// "100" for a heartbeat): they would never hand the event over. Any case
// is taken, for clients that read headers without it.
func statusLike(k string) bool {
	return strings.EqualFold(k, "Status") || strings.EqualFold(k, "Description")
}

// set adds the header key: value, but none in the "Nats-" namespace.
func (s *headerSetter) set(key, value string) {
	if isNATSHeader(key) {
		return // only the relay sets JetStream's control headers
	}
	if verbatim(key, value) && !(s.empty && statusLike(key)) {
		s.msg.Header.Set(key, value)
		delete(s.enc, key)
		return
	}
	if s.enc == nil {
		s.enc = make(map[string]string)
	}
	s.enc[key] = value
	s.msg.Header.Del(key)
}

// setInjected adds a header a Propagator writes, after the metadata: as
// set, but none of the relay's metadata names either (relay.Headers drops
// the event's), and replacing the event's header of that name in any case.
func (s *headerSetter) setInjected(key, value string) {
	if relay.IsMetadataHeader(key) {
		return
	}
	// It replaces the event's header of the same name in any case
	// (NATS header names are case-sensitive: both went out).
	relay.DeleteOtherCases(s.msg.Header, key)
	relay.DeleteOtherCases(s.enc, key)
	s.set(key, value)
}

// finish adds the [HeaderEncoded] header when a header needs it. A header
// whose name or value is not valid UTF-8 cannot be written into it
// exactly: that is an error. Only a Propagator can set one; the event's
// fields and headers are valid UTF-8.
func (s *headerSetter) finish() error {
	if len(s.enc) == 0 {
		return nil
	}
	for _, k := range slices.Sorted(maps.Keys(s.enc)) {
		if !utf8.ValidString(k) || !utf8.ValidString(s.enc[k]) {
			return fmt.Errorf("header %q cannot travel: NATS cannot carry it verbatim and it is not valid UTF-8", k)
		}
	}
	b, err := json.Marshal(s.enc)
	if err != nil {
		return fmt.Errorf("encode the headers NATS cannot carry verbatim: %w", err)
	}
	s.msg.Header.Set(HeaderEncoded, asciiJSON(b))
	return nil
}

// asciiJSON returns the JSON text b with every character outside
// printable ASCII (DEL and non-ASCII; json.Marshal escapes the control
// characters already) escaped as \uXXXX, a UTF-16 surrogate pair beyond
// the Basic Multilingual Plane, and the dash of every "nats-" (in any
// case) escaped as \u002d, so that nats-server never reads the text of a
// control header in it (see verbatim). Such characters occur in JSON only
// inside strings, where the escape means the same character.
func asciiJSON(b []byte) string {
	if !slices.ContainsFunc(b, func(c byte) bool { return c >= 0x7f }) && !mentionsNATS(string(b)) {
		return string(b)
	}
	var sb strings.Builder
	sb.Grow(len(b))
	for _, r := range string(b) {
		switch {
		case r == '-' && mentionsNATS(lastFour(sb.String())+"-"):
			writeEscape(&sb, r)
		case r < 0x7f:
			sb.WriteRune(r)
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			writeEscape(&sb, r1)
			writeEscape(&sb, r2)
		default:
			writeEscape(&sb, r)
		}
	}
	return sb.String()
}

// lastFour returns the last four bytes of s, or s when it is shorter.
func lastFour(s string) string {
	return s[max(0, len(s)-4):]
}

// writeEscape writes the JSON escape \uXXXX of the UTF-16 unit r.
func writeEscape(sb *strings.Builder, r rune) {
	fmt.Fprintf(sb, `\u%04x`, r)
}

// DecodeHeaders returns the headers a relayed message carries, as the
// relay was given them: a copy of h where every header inside
// [HeaderEncoded] is back under its own name with its exact value, and
// HeaderEncoded itself is gone. Without HeaderEncoded it returns a copy of
// h. h is not modified. Use it on the Header of a nats.Msg or a
// jetstream.RawStreamMsg, or on a jetstream.Msg's Headers():
//
//	h, err := natsjs.DecodeHeaders(msg.Headers())
//	aggregateID := h.Get(relay.HeaderAggregateID)
//
// A consumer that reads the NATS headers directly sees every header NATS
// carries verbatim, exactly, and misses only those inside HeaderEncoded;
// there are none when each name is made of ASCII letters, digits and
// dashes, no value holds a line break or starts or ends with a space or a
// tab, and no name or value mentions "Nats-" (in any case). A malformed HeaderEncoded (see [ErrEncodedHeaders]) returns
// an error and no headers.
func DecodeHeaders(h nats.Header) (nats.Header, error) {
	out := make(nats.Header, len(h))
	for k, vs := range h {
		out[k] = slices.Clone(vs)
	}
	vs, ok := out[HeaderEncoded]
	if !ok {
		return out, nil
	}
	if len(vs) != 1 {
		return nil, fmt.Errorf("%w: %d values, want one", ErrEncodedHeaders, len(vs))
	}
	var enc map[string]string
	if err := json.Unmarshal([]byte(vs[0]), &enc); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrEncodedHeaders, err)
	}
	if enc == nil {
		return nil, fmt.Errorf("%w: not a JSON object", ErrEncodedHeaders)
	}
	delete(out, HeaderEncoded)
	for k, v := range enc {
		out.Set(k, v)
	}
	return out, nil
}
