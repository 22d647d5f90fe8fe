package jsoncol

import (
	"math"
	"strconv"
)

// Facts are what a dialect must know of a JSON document to tell whether
// its server's JSON column stores it: each server refuses, or blows up,
// documents that are valid JSON (and so pass the event builder).
type Facts struct {
	// Depth is the deepest nesting of arrays and objects (0 for a
	// scalar, 1 for [1]).
	Depth int
	// NUL: a \u0000 escape in a string (PostgreSQL's jsonb cannot hold
	// it).
	NUL bool
	// LoneSurrogate: a \u escape of a UTF-16 surrogate that is not a
	// high one followed by a low one (neither jsonb nor MariaDB's JSON
	// check accept it).
	LoneSurrogate bool
	// NumericOverflow: a number PostgreSQL's numeric cannot hold: more
	// than MaxNumericIntDigits digits before the decimal point or
	// MaxNumericScale after it, as written out in full (1e131072,
	// 1e-16384, 0.5e-16383).
	NumericOverflow bool
	// FloatOverflow: a number beyond the range of a float64 (above
	// 1.7976931348623157e308 in magnitude), which MySQL 8's JSON refuses.
	FloatOverflow bool
	// NumericGrowth is how many bytes longer the document's numbers are
	// when written out in full, as jsonb keeps and prints them, than as
	// written (1e1000 grows by 995): the sum over the numbers that grow.
	NumericGrowth int64
}

// The limits of PostgreSQL's numeric type, which jsonb stores every
// number as: digits before the decimal point, and after it.
const (
	MaxNumericIntDigits = 131072
	MaxNumericScale     = 16383
	// maxNumericExponent: numeric refuses a written exponent this large
	// in magnitude whatever the digits (0e1073741823 too).
	maxNumericExponent = 1<<30 - 1
)

// Inspect walks the valid JSON document p once and returns its Facts. On
// invalid JSON it returns what it saw; the caller validated p before.
func Inspect(p []byte) Facts {
	var f Facts
	depth := 0
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c == '[' || c == '{':
			depth++
			f.Depth = max(f.Depth, depth)
		case c == ']' || c == '}':
			depth--
		case c == '"':
			i = f.string(p, i+1)
		case c == '-' || (c >= '0' && c <= '9'):
			i = f.number(p, i)
		}
	}
	return f
}

// string scans the string whose contents start at p[i] and returns the
// index of its closing quote.
func (f *Facts) string(p []byte, i int) int {
	for ; i < len(p); i++ {
		switch p[i] {
		case '"':
			return i
		case '\\':
			if i+1 < len(p) && p[i+1] == 'u' {
				i = f.escape(p, i)
			} else {
				i++ // the escaped character (\\, \", ...)
			}
		}
	}
	return i
}

// escape checks the \u escape at p[i] and returns the index of its last
// byte (of the low surrogate's escape for a pair).
func (f *Facts) escape(p []byte, i int) int {
	r, ok := hex4(p, i+2)
	if !ok {
		return i + 1
	}
	switch {
	case r == 0:
		f.NUL = true
	case r >= 0xD800 && r <= 0xDBFF:
		lo, ok := -1, false
		if i+7 < len(p) && p[i+6] == '\\' && p[i+7] == 'u' {
			lo, ok = hex4(p, i+8)
		}
		if ok && lo >= 0xDC00 && lo <= 0xDFFF {
			return i + 11
		}
		f.LoneSurrogate = true
	case r >= 0xDC00 && r <= 0xDFFF:
		f.LoneSurrogate = true
	}
	return i + 5
}

// hex4 parses the four hex digits at p[i:].
func hex4(p []byte, i int) (int, bool) {
	if i+4 > len(p) {
		return 0, false
	}
	n := 0
	for _, c := range p[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			n = n<<4 | int(c-'0')
		case c >= 'a' && c <= 'f':
			n = n<<4 | int(c-'a'+10)
		case c >= 'A' && c <= 'F':
			n = n<<4 | int(c-'A'+10)
		default:
			return 0, false
		}
	}
	return n, true
}

// maxExponent bounds the exponents the scanner tracks: anything beyond is
// as far out of numeric's range.
const maxExponent = 1 << 40

// number scans the number starting at p[i] (-?int(.frac)?([eE][+-]?exp)?)
// and returns the index of its last byte. It records how its value
// written out in full compares with numeric's limits and its length.
func (f *Facts) number(p []byte, i int) int {
	start := i
	if p[i] == '-' {
		i++
	}
	intStart := i
	for i < len(p) && p[i] >= '0' && p[i] <= '9' {
		i++
	}
	intDigits := i - intStart
	intZero := intDigits == 1 && p[intStart] == '0'
	fracDigits, fracLeadingZeros, fracZero := 0, 0, true
	if i < len(p) && p[i] == '.' {
		i++
		fracStart := i
		for i < len(p) && p[i] >= '0' && p[i] <= '9' {
			if p[i] != '0' {
				fracZero = false
			} else if fracZero {
				fracLeadingZeros++
			}
			i++
		}
		fracDigits = i - fracStart
	}
	var exp int64
	if i < len(p) && (p[i] == 'e' || p[i] == 'E') {
		i++
		neg := false
		if i < len(p) && (p[i] == '+' || p[i] == '-') {
			neg = p[i] == '-'
			i++
		}
		for i < len(p) && p[i] >= '0' && p[i] <= '9' {
			if exp < maxExponent {
				exp = exp*10 + int64(p[i]-'0')
			}
			i++
		}
		if neg {
			exp = -exp
		}
	}
	written := int64(i - start)
	// Written out in full: the digits after the point (numeric's scale,
	// kept even for zero), and the digits before it.
	scale := max(0, int64(fracDigits)-exp)
	var whole int64 // digits before the point; 0 when the value is below 1
	switch {
	case !intZero:
		whole = int64(intDigits) + exp
	case !fracZero:
		whole = exp - int64(fracLeadingZeros)
	}
	if scale > MaxNumericScale || whole > MaxNumericIntDigits || exp >= maxNumericExponent || exp <= -maxNumericExponent {
		f.NumericOverflow = true
	}
	// A float64 holds at most 309 digits before the point.
	switch {
	case whole > 309:
		f.FloatOverflow = true
	case whole == 309:
		if v, err := strconv.ParseFloat(string(p[start:i]), 64); err != nil && math.IsInf(v, 0) {
			f.FloatOverflow = true
		}
	}
	full := max(1, whole) + scale
	if scale > 0 {
		full++ // the point
	}
	if p[start] == '-' {
		full++
	}
	if grow := full - written; grow > 0 {
		f.NumericGrowth += grow
	}
	return i - 1
}
