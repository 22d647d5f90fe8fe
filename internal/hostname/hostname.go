// Package hostname holds the host-name rules the dashboard and outboxctl
// share.
package hostname

import "strings"

// EndsInNumber reports whether the last label of name is a number as the
// URL standard reads one (decimal digits, or 0x and hex digits): browsers
// then parse the whole host as an IPv4 address, so a Host header never
// carries such a name as written.
func EndsInNumber(name string) bool {
	name = strings.TrimSuffix(name, ".")
	last := strings.ToLower(name[strings.LastIndexByte(name, '.')+1:])
	if hex, ok := strings.CutPrefix(last, "0x"); ok {
		return strings.Trim(hex, "0123456789abcdef") == ""
	}
	return last != "" && strings.Trim(last, "0123456789") == ""
}
