package jsoncol

import (
	"strings"
	"testing"
)

func TestInspect(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		want Facts
	}{
		{`1`, Facts{}},
		{`[]`, Facts{Depth: 1}},
		{`{"a":[{"b":[]}],"c":{}}`, Facts{Depth: 4}},
		{`["[[[[", "{{"]`, Facts{Depth: 1}},              // brackets in strings do not nest
		{`{"k\"[":"\\u0000"}`, Facts{Depth: 1}},          // escaped quote, escaped backslash
		{`{"\u0000":1}`, Facts{Depth: 1, NUL: true}},     // in a key
		{`"\ud83d\ude00"`, Facts{}},                      // a pair
		{`"\ud83d"`, Facts{LoneSurrogate: true}},         // high alone
		{`"\ude00\ud83d"`, Facts{LoneSurrogate: true}},   // low first
		{`"\ud83dx\ude00"`, Facts{LoneSurrogate: true}},  // split
		{`["1e999"]`, Facts{Depth: 1}},                   // a string, not a number
		{`[1e5]`, Facts{Depth: 1, NumericGrowth: 3}},     // 100000
		{`[-1.5E-3]`, Facts{Depth: 1, NumericGrowth: 0}}, // -0.0015: as long
		{`[1e131072]`, Facts{Depth: 1, NumericOverflow: true, FloatOverflow: true, NumericGrowth: 131073 - 8}},
		{`[0e999999]`, Facts{Depth: 1}}, // zero stays 0
		{`[0e1073741822]`, Facts{Depth: 1}},
		{`[0e1073741823]`, Facts{Depth: 1, NumericOverflow: true}}, // numeric refuses the exponent itself
		{`[-0.0E-2000000000]`, Facts{Depth: 1, NumericOverflow: true, NumericGrowth: 2000000004 - 16}},
		{`[1.7976931348623157e308]`, Facts{Depth: 1, NumericGrowth: 309 - 22}},
		{`[1.7976931348623159e308]`, Facts{Depth: 1, FloatOverflow: true, NumericGrowth: 309 - 22}},
		{`[1e309]`, Facts{Depth: 1, FloatOverflow: true, NumericGrowth: 310 - 5}},
		{`[1e-400]`, Facts{Depth: 1, NumericGrowth: 402 - 6}}, // underflow is no overflow
		{`[0.0e-16384]`, Facts{Depth: 1, NumericOverflow: true, NumericGrowth: 16387 - 10}},
		{`[1e1000,2e1000]`, Facts{Depth: 1, FloatOverflow: true, NumericGrowth: 2 * 995}},
	} {
		if got := Inspect([]byte(tc.doc)); got != tc.want {
			t.Errorf("Inspect(%s) = %+v, want %+v", tc.doc, got, tc.want)
		}
	}
}

// Inspect never panics and never reads past the document, whatever it is
// given (it is only given valid JSON, but a truncated escape or number
// must not matter).
func FuzzInspect(f *testing.F) {
	for _, s := range []string{`"\u`, `"\ud83d\u`, `1e`, `-`, `1.`, `[`, `]]]`, `"\`, strings.Repeat("9", 40) + "e99999999999999999999999"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		f := Inspect(p)
		if f.NumericGrowth < 0 {
			t.Fatalf("negative growth for %q", p)
		}
	})
}
