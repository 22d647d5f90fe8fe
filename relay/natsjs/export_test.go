package natsjs

// Verbatim exposes verbatim to the tests, which check it against nats.go.
var Verbatim = verbatim

// MsgID and MsgIDPrefix expose the Nats-Msg-Id of an event id to the
// tests.
var MsgID = msgID

const MsgIDPrefix = msgIDPrefix

// VerbatimValue exposes verbatim's rule for a value (a Nats-Msg-Id's).
var VerbatimValue = verbatimValue

// IsStreamFull exposes the test of a full stream's refusal.
var IsStreamFull = isStreamFull

// IsAccountFull exposes the test of a full account's refusal.
var IsAccountFull = isAccountFull

// IsServerStoreFull exposes the test of a full server storage's refusal.
var IsServerStoreFull = isServerStoreFull
