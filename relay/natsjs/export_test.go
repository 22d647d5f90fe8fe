package natsjs

// Verbatim exposes verbatim to the tests, which check it against nats.go.
var Verbatim = verbatim
