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

// MaxNameLen is the longest name of a database in a tenant set shown by
// the dashboard (dashboard.Database.Name, outboxctl serve --db NAME=DSN),
// in bytes.
const MaxNameLen = 64

// CheckName checks the name of a database in the dashboard's selector:
// 1..MaxNameLen ASCII letters, digits, '.', '_' or '-', so that it goes
// into URLs and pages as it is.
func CheckName(name string) error {
	if name == "" || len(name) > MaxNameLen {
		return fmt.Errorf("must be 1..%d characters, got %d", MaxNameLen, len(name))
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("%q holds %q: use letters, digits, '.', '_' or '-'", name, r)
		}
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
