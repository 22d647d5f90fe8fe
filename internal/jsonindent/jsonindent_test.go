package jsonindent

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

var docs = []string{
	`1`, `"a"`, `null`, `[]`, `{}`, `[[]]`, `[{}]`, `{"a":[]}`, `[1,2,3]`,
	`{"a":1,"b":[true,false,null],"c":{"d":"e\"}]\\","f":{}}}`,
	` { "a" : [ 1 , { "b" : 2 } ] , "c" : "x y" } `,
	`[[[1,[2]],3],{"k":[{"l":{"m":[]}}]}]`,
	`"\u00e9\n\t"`,
}

// want is json.Indent's output without the trailing space it keeps.
func want(t testing.TB, src []byte) []byte {
	var c, b bytes.Buffer
	if err := json.Compact(&c, src); err != nil {
		t.Fatal(err)
	}
	if err := json.Indent(&b, c.Bytes(), "", "  "); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestIndentIsJSONIndent(t *testing.T) {
	for _, d := range docs {
		got, ok := Indent([]byte(d), "  ", 0, 0)
		if w := want(t, []byte(d)); !ok || !bytes.Equal(got, w) {
			t.Errorf("Indent(%s) = %q, %v; want %q", d, got, ok, w)
		}
	}
}

func TestIndentGivesUpPastLimit(t *testing.T) {
	src := []byte(strings.Repeat("[", 2000) + strings.Repeat("]", 2000))
	if out, ok := Indent(src, "  ", 0, 1<<20); ok || out != nil {
		t.Fatalf("Indent = %d bytes, %v; want nothing, false", len(out), ok)
	}
	w := want(t, src)
	if out, ok := Indent(src, "  ", 0, len(w)); !ok || !bytes.Equal(out, w) {
		t.Fatalf("Indent within exactly its size = %d bytes, %v", len(out), ok)
	}
	if _, ok := Indent(src, "  ", 0, len(w)-1); ok {
		t.Fatal("Indent one byte short of its size succeeded")
	}
}

func TestIndentWritesDeepValuesOnOneLine(t *testing.T) {
	for _, c := range []struct {
		src      string
		maxDepth int
		want     string
	}{
		{`{"a":[1,[2,3]],"b":{}}`, 1, "{\n  \"a\": [1,[2,3]],\n  \"b\": {}\n}"},
		{`[{"a":{"b":1}},[]]`, 2, "[\n  {\n    \"a\": {\"b\": 1}\n  },\n  []\n]"},
		{`[[1]]`, 1, "[\n  [1]\n]"},
	} {
		got, ok := Indent([]byte(c.src), "  ", c.maxDepth, 0)
		if !ok || string(got) != c.want {
			t.Errorf("Indent(%s, maxDepth %d) = %q, %v; want %q", c.src, c.maxDepth, got, ok, c.want)
		}
		if !json.Valid(got) {
			t.Errorf("Indent(%s, maxDepth %d) is not JSON", c.src, c.maxDepth)
		}
	}
	// Bounded by (2 + maxDepth × len(indent)) × len(src).
	src := []byte("[" + strings.Repeat("[[[[1,1,1,1,1]]]],", 5000) + "1]")
	for d := 1; d <= 4; d++ {
		out, _ := Indent(src, "  ", d, 0)
		if len(out) > (2+d*2)*len(src) {
			t.Errorf("maxDepth %d: %d bytes from %d", d, len(out), len(src))
		}
	}
}

func FuzzIndent(f *testing.F) {
	for _, d := range docs {
		f.Add([]byte(d), 0)
	}
	f.Fuzz(func(t *testing.T, src []byte, maxDepth int) {
		if !json.Valid(src) {
			return
		}
		maxDepth = max(0, maxDepth%8)
		got, ok := Indent(src, "  ", 0, 0)
		if w := want(t, src); !ok || !bytes.Equal(got, w) {
			t.Fatalf("Indent(%q) = %q; want %q", src, got, w)
		}
		got, ok = Indent(src, "  ", maxDepth, 0)
		if !ok || !json.Valid(got) {
			t.Fatalf("Indent(%q, maxDepth %d) = %q, not JSON", src, maxDepth, got)
		}
		var a, b bytes.Buffer
		_ = json.Compact(&a, src)
		_ = json.Compact(&b, got)
		if !bytes.Equal(a.Bytes(), b.Bytes()) {
			t.Fatalf("Indent(%q, maxDepth %d) changed the document: %q", src, maxDepth, got)
		}
		lim := max(1, len(got)/2)
		if out, ok := Indent(src, "  ", maxDepth, lim); ok && len(out) > lim {
			t.Fatalf("Indent(limit %d) = %d bytes", lim, len(out))
		}
	})
}
