// Package dsnsecret finds the passwords in a data source name (a MySQL
// DSN, a PostgreSQL URL or key=value string, parameters of a SQLite file:
// URI), so that what is shown to people (errors, logs, the DSN itself)
// keeps everything else and never the password.
package dsnsecret

import (
	"net/url"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// mysqlScheme is an optional prefix of a MySQL DSN.
const mysqlScheme = "mysql://"

// LooksMySQL reports whether dsn is a MySQL DSN rather than a SQLite path.
func LooksMySQL(dsn string) bool {
	_, scheme := TrimMySQLScheme(dsn)
	return scheme ||
		strings.Contains(dsn, "@tcp(") || strings.Contains(dsn, "@unix(") ||
		strings.HasPrefix(dsn, "tcp(") || strings.HasPrefix(dsn, "unix(")
}

// TrimMySQLScheme returns dsn without its optional mysql:// prefix (in
// any case, as URL schemes are) and whether it had one.
func TrimMySQLScheme(dsn string) (string, bool) {
	if len(dsn) >= len(mysqlScheme) && strings.EqualFold(dsn[:len(mysqlScheme)], mysqlScheme) {
		return dsn[len(mysqlScheme):], true
	}
	return dsn, false
}

// LooksPostgresURL reports whether dsn is a PostgreSQL URL (postgres://
// or postgresql://).
func LooksPostgresURL(dsn string) bool {
	scheme, _, ok := strings.Cut(dsn, "://")
	if !ok {
		return false
	}
	switch strings.ToLower(scheme) {
	case "postgres", "postgresql":
		return true
	}
	return false
}

// passParam matches a parameter whose name ends in pass, passwd or
// password (password=, sslpassword=, go-sqlite3's _auth_pass=; not
// allowNativePasswords=) in a URL query or a key=value string, with its
// value: quoted ('…', backslash escapes) or not (up to a space, '&' or
// ';', backslash escapes included), spaces allowed around '='.
var passParam = regexp.MustCompile(`(?i)([a-z_]*(?:pass|passwd|password)\s*=\s*)('(?:[^'\\]|\\.)*'|(?:\\.|[^\s&;\\])*)`)

// mysqlPassword returns where the password of a MySQL DSN starts and
// ends (dsn[i:j]), found the way go-sql-driver/mysql finds it: the user
// part ends at the last '@' before the last '/', and the password follows
// the first ':' of it. ok is false when there is none.
func mysqlPassword(dsn string) (i, j int, ok bool) {
	if rest, found := TrimMySQLScheme(dsn); found {
		i, j, ok := mysqlPassword(rest)
		return i + len(mysqlScheme), j + len(mysqlScheme), ok
	}
	slash := strings.LastIndexByte(dsn, '/')
	if slash <= 0 {
		return 0, 0, false
	}
	at := strings.LastIndexByte(dsn[:slash], '@')
	if at < 0 {
		return 0, 0, false
	}
	colon := strings.IndexByte(dsn[:at], ':')
	if colon < 0 || colon+1 == at {
		return 0, 0, false
	}
	// A SQLite path may hold ':' and '@' too, but then a '/' comes before
	// them; a user name holds none.
	if !LooksMySQL(dsn) && strings.ContainsRune(dsn[:colon], '/') {
		return 0, 0, false
	}
	return colon + 1, at, true
}

// urlPasswords returns the password spans of a URL (scheme://…): the one
// of its user information and the value of a password query parameter.
func urlPasswords(dsn string) [][2]int {
	var spans [][2]int
	_, rest, _ := strings.Cut(dsn, "://")
	start := len(dsn) - len(rest)
	authority := rest
	if k := strings.IndexAny(authority, "/?"); k >= 0 {
		authority = authority[:k]
	}
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		if colon := strings.IndexByte(authority[:at], ':'); colon >= 0 && colon+1 < at {
			spans = append(spans, [2]int{start + colon + 1, start + at})
		}
	}
	if q := strings.IndexByte(dsn, '?'); q >= 0 {
		off := q + 1
		for _, kv := range strings.Split(dsn[q+1:], "&") {
			if v, ok := strings.CutPrefix(kv, "password="); ok && v != "" {
				spans = append(spans, [2]int{off + len("password="), off + len(kv)})
			}
			off += len(kv) + 1
		}
	}
	return spans
}

// Spans returns where the passwords of dsn are (dsn[s[0]:s[1]]), sorted
// and merged where they overlap: a MySQL DSN's or a URL's, and the value
// of every parameter named like a password.
func Spans(dsn string) [][2]int {
	var spans [][2]int
	switch {
	case LooksPostgresURL(dsn):
		spans = urlPasswords(dsn)
	default:
		if i, j, ok := mysqlPassword(dsn); ok {
			spans = append(spans, [2]int{i, j})
		}
	}
	for _, m := range passParam.FindAllStringSubmatchIndex(dsn, -1) {
		if m[5] > m[4] {
			spans = append(spans, [2]int{m[4], m[5]})
		}
	}
	slices.SortFunc(spans, func(a, b [2]int) int { return a[0] - b[0] })
	var merged [][2]int
	for _, s := range spans {
		if n := len(merged); n > 0 && s[0] <= merged[n-1][1] {
			merged[n-1][1] = max(merged[n-1][1], s[1])
			continue
		}
		merged = append(merged, s)
	}
	return merged
}

// Mask returns dsn with each password replaced by ***.
func Mask(dsn string) string {
	spans := Spans(dsn)
	for i := len(spans) - 1; i >= 0; i-- {
		dsn = dsn[:spans[i][0]] + "***" + dsn[spans[i][1]:]
	}
	return dsn
}

// minFragment is the shortest piece of a password Scrub removes from a
// message: a driver that misreads the DSN may quote part of the password
// (pgx masks "Sec" of "Sec@r3tPW" and shows "@r3tPW" as the host).
const minFragment = 4

// Scrub returns msg with every password of dsn, as written or as a driver
// reads it (unquoted, unescaped, URL-decoded), and every piece of it of
// minFragment bytes or more, replaced by ***. A password shorter than
// minFragment is replaced only where it stands on its own (no letter or
// digit right before or after it): inside other words it says nothing,
// and replacing it there would garble the message.
func Scrub(msg, dsn string) string {
	var secrets []string
	add := func(s string) {
		if s != "" && !slices.Contains(secrets, s) {
			secrets = append(secrets, s)
		}
	}
	for _, s := range Spans(dsn) {
		v := dsn[s[0]:s[1]]
		add(v)
		if u := strings.TrimPrefix(strings.TrimSuffix(v, "'"), "'"); u != v {
			add(u)
			v = u
		}
		add(unescape(v))
		if d, err := url.PathUnescape(v); err == nil {
			add(d)
		}
	}
	slices.SortFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	for _, s := range secrets {
		if len(s) < minFragment {
			msg = replaceStandalone(msg, s)
		} else {
			msg = strings.ReplaceAll(msg, s, "***")
		}
	}
	for _, s := range secrets {
		for n := len(s) - 1; n >= minFragment; n-- {
			for i := 0; i+n <= len(s); i++ {
				if f := s[i : i+n]; f != "***" && strings.Contains(msg, f) {
					msg = strings.ReplaceAll(msg, f, "***")
				}
			}
		}
	}
	return msg
}

// replaceStandalone replaces by *** each occurrence of s in msg that has
// no letter or digit right before or after it.
func replaceStandalone(msg, s string) string {
	var b strings.Builder
	for {
		i := strings.Index(msg, s)
		if i < 0 {
			b.WriteString(msg)
			return b.String()
		}
		before, _ := utf8.DecodeLastRuneInString(msg[:i])
		after, _ := utf8.DecodeRuneInString(msg[i+len(s):])
		b.WriteString(msg[:i])
		if wordRune(before) || wordRune(after) {
			b.WriteString(s)
		} else {
			b.WriteString("***")
		}
		msg = msg[i+len(s):]
	}
}

// wordRune reports whether r is a letter or a digit.
func wordRune(r rune) bool { return r != utf8.RuneError && (unicode.IsLetter(r) || unicode.IsDigit(r)) }

// unescape removes the backslashes of a key=value string's value.
func unescape(v string) string {
	if !strings.Contains(v, `\`) {
		return v
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] == '\\' && i+1 < len(v) {
			i++
		}
		b.WriteByte(v[i])
	}
	return b.String()
}
