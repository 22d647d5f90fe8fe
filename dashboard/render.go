package dashboard

import (
	"bytes"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// page is what every template gets.
type page struct {
	Title     string // the page's own title
	AppTitle  string
	Nav       string // the nav entry to highlight
	Base      string
	DB        string   // the selected database ("" for a single store)
	DBs       []string // the tenant set's databases, for the selector
	Mutations bool
	Payloads  bool
	HasInbox  bool // the selected database has an inbox
	CSRF      string
	Data      any
}

// URL returns the link to path (relative to the base path) with the
// given query parameters (name, value pairs; empty values are left out)
// and the selected database.
func (p *page) URL(path string, kv ...string) string {
	v := url.Values{}
	if p.DB != "" {
		v.Set("db", p.DB)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			v.Add(kv[i], kv[i+1])
		}
	}
	u := p.Base + path
	if len(v) > 0 {
		u += "?" + v.Encode()
	}
	return u
}

// DBURL is the overview of database name, for the selector.
func (p *page) DBURL(name string) string {
	return p.Base + "?" + url.Values{"db": {name}}.Encode()
}

// render writes the named page with status 200, or a plain 500 when the
// template fails (before anything was written).
func (h *handler) render(w http.ResponseWriter, r *http.Request, src *source, status int, name string, p *page) {
	p.AppTitle = h.cfg.Title
	p.Base = h.cfg.BasePath
	p.Mutations = h.cfg.AllowMutations
	p.Payloads = h.cfg.ShowPayloads
	if src != nil {
		p.DB = src.name
		p.HasInbox = src.inbox != nil
	}
	if len(h.cfg.Databases) > 0 {
		for _, d := range h.cfg.Databases {
			p.DBs = append(p.DBs, d.Name)
		}
	}
	if h.cfg.AllowMutations {
		p.CSRF = h.csrf.token(w, r)
	}
	var b bytes.Buffer
	if err := h.pages[name].ExecuteTemplate(&b, "layout", p); err != nil {
		h.log.ErrorContext(r.Context(), "outbox dashboard: rendering failed", "page", name, "error", err)
		http.Error(w, "internal error rendering the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(b.Bytes())
	}
}

// fail renders the error page with status and msg (escaped like any text).
func (h *handler) fail(w http.ResponseWriter, r *http.Request, src *source, status int, msg string) {
	h.render(w, r, src, status, "error", &page{Title: http.StatusText(status), Data: errorData{Status: status, Msg: msg}})
}

// failStore reports a failed database read or write: logged, and shown.
func (h *handler) failStore(w http.ResponseWriter, r *http.Request, src *source, what string, err error) {
	err = timedOut(r.Context(), h.cfg.QueryTimeout, err)
	h.log.ErrorContext(r.Context(), "outbox dashboard: "+what+" failed", storeArgs(src.name, "error", err)...)
	h.fail(w, r, src, storeStatus(err), what+" failed: "+err.Error())
}

// storeStatus is the status of a page whose database work failed with
// err: 504 Gateway Timeout when Config.QueryTimeout cut it short, 500
// Internal Server Error otherwise.
func storeStatus(err error) int {
	if errors.As(err, new(*timeoutError)) {
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError
}

type errorData struct {
	Status int
	Msg    string
}

// funcs are the template helpers.
var funcs = template.FuncMap{
	"time":     fmtTime,
	"ago":      fmtAgo,
	"dur":      fmtDur,
	"trunc":    trunc,
	"inc":      func(i int) int { return i + 1 },
	"itoa":     strconv.Itoa,
	"i64":      func(n int64) string { return strconv.FormatInt(n, 10) },
	"rfc3339":  func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"percent":  percent,
	"barY":     barY,
	"barX":     func(i int) int { return i * barPitch },
	"chartW":   func(n int) int { return n * barPitch },
	"chartH":   func() int { return chartHeight },
	"barWidth": func() int { return barPitch - 2 },
	"add":      func(a, b int) int { return a + b },
	"vis":      vis,
	"quote":    strconv.Quote,
	"formName": formName,
	"formValue": func(s string) string {
		if formName("", s) != "" {
			return strconv.Quote(s)
		}
		return s
	},
}

// formName is the name of the form field carrying s for parameter name:
// name, or name+"q" when s holds a line break, which a browser would
// send as CR LF: the field then carries s quoted (formValue), which
// formText reads back.
func formName(name, s string) string {
	if strings.ContainsAny(s, "\r\n") {
		return name + "q"
	}
	return name
}

// vis makes the control and invisible format characters of s visible as
// Go escapes (\x1b, \t, \u200b): ids, types and tenants may hold them,
// and two that differ by one must read differently.
func vis(s string) string {
	if !strings.ContainsFunc(s, hidden) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if hidden(r) {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func hidden(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == utf8.RuneError
}

// Chart geometry (SVG units).
const (
	barPitch    = 24
	chartHeight = 80
)

// barY returns the y and height of a bar of n out of max.
func barY(n, max int) [2]int {
	if max <= 0 || n <= 0 {
		return [2]int{chartHeight, 0}
	}
	h := n * chartHeight / max
	if h < 1 {
		h = 1
	}
	return [2]int{chartHeight - h, h}
}

func percent(n, total int) string {
	if total == 0 {
		return "0%"
	}
	return fmt.Sprintf("%.1f%%", float64(n)*100/float64(total))
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "–"
	}
	return t.UTC().Format("2006-01-02 15:04:05.000 UTC")
}

func fmtAgo(now, t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return fmtDur(now.Sub(t)) + " ago"
}

func fmtDur(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + fmtDur(-d)
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	case d < 48*time.Hour:
		return d.Round(time.Second).String()
	default:
		return fmt.Sprintf("%dd%s", d/(24*time.Hour), (d % (24 * time.Hour)).Round(time.Minute))
	}
}

// trunc cuts s to n characters, with an ellipsis.
func trunc(n int, s string) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}
