// Package ident makes and checks the identifiers the dispatchers share:
// owner tokens and store ids.
package ident

import (
	"fmt"
	"os"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/oklog/ulid/v2"

	"github.com/outbox-go/outbox/core"
)

// MaxStoreIDLen is the longest store identifier, in bytes
// (dispatcher.MaxStoreIDLen).
const MaxStoreIDLen = 128

// ValidateStoreID checks a store identifier: non-empty valid UTF-8 of at
// most [MaxStoreIDLen] bytes without control characters.
func ValidateStoreID(id string) error {
	switch {
	case id == "":
		return &core.ConfigError{Field: "store id", Msg: "must not be empty"}
	case len(id) > MaxStoreIDLen:
		return &core.ConfigError{Field: "store id", Msg: fmt.Sprintf("must be at most %d bytes", MaxStoreIDLen)}
	case !utf8.ValidString(id) || strings.ContainsFunc(id, unicode.IsControl):
		return &core.ConfigError{Field: "store id", Msg: "must be valid text without control characters"}
	}
	return nil
}

// OwnerToken returns a fresh owner token: the host name (shortened) and
// a ULID, unique per call, at most core.MaxOwnerLen bytes.
func OwnerToken() string {
	host, _ := os.Hostname()
	host = strings.Map(func(r rune) rune {
		if r < 0x21 || r > 0x7e {
			return -1
		}
		return r
	}, host)
	if len(host) > 30 {
		host = host[:30]
	}
	if host == "" {
		host = "node"
	}
	return host + "-" + ulid.Make().String()
}
