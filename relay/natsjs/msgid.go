package natsjs

import (
	"encoding/base64"
	"strings"
)

// msgIDPrefix starts the Nats-Msg-Id of an event id that does not travel
// as it is; no ULID (the default id) starts with it.
const msgIDPrefix = "~b64:"

// msgID returns the Nats-Msg-Id of the event id id, on which JetStream
// detects duplicates: id itself when NATS carries it verbatim (see
// verbatim) and it does not start with msgIDPrefix, so an ordinary id is
// its own Msg-Id, as it always was; otherwise msgIDPrefix followed by id's
// bytes in unpadded standard base64 (whose alphabet has no dash, so the
// result never mentions "Nats-", which nats-server could take for a
// control header: see verbatim). nats.go turns CR and LF in a header value
// into spaces and trims the spaces and tabs around it, so "a\nb" and
// "a b", or " x" and "x", sent as they are, would arrive as one Msg-Id and
// JetStream would drop the second event as a duplicate of the first.
// msgID is one to one: a verbatim id without the prefix is left alone, any
// other id gets the prefix, and base64 is one to one. Its result
// always travels verbatim and is never empty (an empty Msg-Id would turn
// off duplicate detection).
func msgID(id string) string {
	if id != "" && verbatimValue(id) && !strings.HasPrefix(id, msgIDPrefix) {
		return id
	}
	return msgIDPrefix + base64.RawStdEncoding.EncodeToString([]byte(id))
}
