// Package jsonindent indents JSON for people within a bound on the
// output's size.
//
// encoding/json's Indent writes whatever the indentation takes, and the
// indentation of nested values grows with their depth: n arrays nested
// in one another, 2n bytes, indent to about 2n² bytes (a 234 KiB payload
// of nested arrays to 2.4 GB). Indent here gives up instead, past a size
// the caller picks, or writes the values nested deeper than a depth the
// caller picks on one line.
package jsonindent

// Indent returns the valid JSON document src indented as
// json.Indent(dst, src, "", indent) indents it, with two differences:
// whitespace outside strings is dropped everywhere (json.Indent keeps it
// at the end), and the values nested deeper than maxDepth levels (0: no
// limit) are written on one line, compactly. It returns false, and no
// text, as soon as the output would exceed limit bytes (0: no limit).
//
// src must be valid JSON (json.Valid): Indent does not check it.
//
// With maxDepth d, the output is at most (2 + d × len(indent)) × len(src)
// bytes: a line break and its indentation follow a byte of src and only
// at depth d or less.
func Indent(src []byte, indent string, maxDepth, limit int) ([]byte, bool) {
	size := len(src) + len(src)/2
	if limit > 0 {
		size = min(size, limit)
	}
	out := make([]byte, 0, size)
	depth := 0    // nesting level of the values being written
	open := false // the last byte written opened an array or object
	inStr, esc := false, false
	over := func(n int) bool { return limit > 0 && len(out)+n > limit }
	// newline breaks the line between or around the values at level
	// (unless it is past maxDepth) and indents the next line by ind.
	newline := func(level, ind int) bool {
		if maxDepth > 0 && level > maxDepth {
			return true
		}
		if over(1 + ind*len(indent)) {
			return false
		}
		out = append(out, '\n')
		for range ind {
			out = append(out, indent...)
		}
		return true
	}
	for _, c := range src {
		if inStr {
			if over(1) {
				return nil, false
			}
			out = append(out, c)
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
			continue
		}
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		if open {
			open = false
			if c == ']' || c == '}' {
				// An empty array or object stays on its line.
				depth--
				if over(1) {
					return nil, false
				}
				out = append(out, c)
				continue
			}
			if !newline(depth, depth) {
				return nil, false
			}
		}
		switch c {
		case '"':
			inStr = true
		case '[', '{':
			depth++
			open = true
		case ']', '}':
			depth--
			if !newline(depth+1, depth) {
				return nil, false
			}
		}
		if over(1) {
			return nil, false
		}
		out = append(out, c)
		switch c {
		case ',':
			if !newline(depth, depth) {
				return nil, false
			}
		case ':':
			if over(1) {
				return nil, false
			}
			out = append(out, ' ')
		}
	}
	return out, true
}
