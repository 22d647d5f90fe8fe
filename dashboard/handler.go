package dashboard

import (
	"crypto/rand"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/outbox-go/outbox/core"
)

//go:embed templates/*.html static/*
var assets embed.FS

// pageNames are the templates rendered inside the layout.
var pageNames = []string{"overview", "dead", "event", "replay", "replayed", "purge", "types", "inbox", "error"}

// handler is the dashboard.
type handler struct {
	cfg     Config
	sources []*source
	byName  map[string]*source
	pages   map[string]*template.Template
	static  http.Handler
	cop     *http.CrossOriginProtection
	csrf    csrf
	log     *slog.Logger
}

// New returns the dashboard configured by cfg, to mount at cfg.BasePath.
// It validates cfg, reporting every invalid field at once (errors wrap
// [core.ErrInvalidConfig], see [core.ConfigError]), and does not touch
// any database: pages read them when they are loaded.
//
// [core.ErrInvalidConfig]: https://pkg.go.dev/github.com/outbox-go/outbox/core#ErrInvalidConfig
// [core.ConfigError]: https://pkg.go.dev/github.com/outbox-go/outbox/core#ConfigError
func New(cfg Config) (http.Handler, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	h := &handler{cfg: cfg, byName: map[string]*source{}, pages: map[string]*template.Template{}, log: cfg.Logger}
	sl := make(slots, cfg.MaxConcurrentReads)
	if cfg.Store != nil {
		h.sources = []*source{newSource("", cfg.Store, cfg.Inbox, sl, cfg.QueryTimeout, cfg.Logger)}
	}
	for _, d := range cfg.Databases {
		h.sources = append(h.sources, newSource(d.Name, d.Store, d.Inbox, sl, cfg.QueryTimeout, cfg.Logger))
	}
	for _, s := range h.sources {
		h.byName[s.name] = s
	}
	for _, name := range pageNames {
		t, err := template.New(name).Funcs(funcs).ParseFS(assets, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("outbox: dashboard: template %s: %w", name, err)
		}
		h.pages[name] = t
	}
	static, err := fs.Sub(assets, "static")
	if err != nil {
		return nil, fmt.Errorf("outbox: dashboard: assets: %w", err)
	}
	h.static = http.StripPrefix(cfg.BasePath+"static/", http.FileServerFS(static))
	h.cop = http.NewCrossOriginProtection()
	for i, o := range cfg.TrustedOrigins {
		o, _ = origin(o) // validated
		if err := h.cop.AddTrustedOrigin(o); err != nil {
			return nil, &core.ConfigError{Field: fmt.Sprintf("TrustedOrigins[%d]", i), Msg: "is refused by http.CrossOriginProtection: " + err.Error()}
		}
	}
	secret := cfg.Secret
	if secret == nil {
		secret = make([]byte, 32)
		_, _ = rand.Read(secret) // never fails (crypto/rand panics rather)
	}
	h.csrf = csrf{secret: secret, path: cfg.BasePath}
	var out http.Handler = h
	if cfg.Middleware != nil {
		out = cfg.Middleware(h)
	}
	if len(cfg.AllowedHosts) > 0 {
		hc := hostCheck{next: out, log: cfg.Logger}
		for _, a := range cfg.AllowedHosts {
			hp, _ := checkAllowedHost(a) // validated
			hc.allowed = append(hc.allowed, hp)
		}
		out = hc
	}
	return out, nil
}

// ServeHTTP routes a request under BasePath.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	hdr.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "+
		"connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Referrer-Policy", "same-origin")
	hdr.Set("X-Frame-Options", "DENY")
	rest, ok := strings.CutPrefix(r.URL.Path, h.cfg.BasePath)
	if !ok {
		if r.URL.Path+"/" == h.cfg.BasePath {
			http.Redirect(w, r, h.cfg.BasePath, http.StatusMovedPermanently)
			return
		}
		h.fail(w, r, nil, http.StatusNotFound, "no such page")
		return
	}
	if strings.HasPrefix(rest, "static/") {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			hdr.Set("Allow", "GET, HEAD")
			h.fail(w, r, nil, http.StatusMethodNotAllowed, "method not allowed")
			return
		}
		if strings.HasSuffix(rest, "/") {
			h.fail(w, r, nil, http.StatusNotFound, "no such page") // no listing of the assets
			return
		}
		hdr.Set("Cache-Control", "public, max-age=3600")
		h.static.ServeHTTP(w, r)
		return
	}
	hdr.Set("Cache-Control", "no-store")
	rt, known := routes[rest]
	if !known {
		h.fail(w, r, nil, http.StatusNotFound, "no such page")
		return
	}
	switch {
	case r.Method == http.MethodPost && rt.post != nil:
		h.post(w, r, rt.post)
		return
	case r.Method != http.MethodGet && r.Method != http.MethodHead:
		hdr.Set("Allow", rt.allow())
		h.fail(w, r, nil, http.StatusMethodNotAllowed, "method not allowed")
		return
	}
	if len(r.URL.RawQuery) > maxQueryLen {
		h.fail(w, r, nil, http.StatusRequestURITooLong, "query too long")
		return
	}
	src, err := h.source(r.URL.Query())
	if err != nil {
		h.fail(w, r, nil, http.StatusNotFound, err.Error())
		return
	}
	h.run(rt.get, w, r, src)
}

// pageFunc serves a page, or runs an action, on a database.
type pageFunc func(h *handler, w http.ResponseWriter, r *http.Request, src *source)

// route is what a path of the dashboard answers: its page to GET and HEAD
// and, for replay, its action to POST (when AllowMutations).
type route struct{ get, post pageFunc }

// allow is the route's methods as its Allow header says them.
func (rt route) allow() string {
	if rt.post != nil {
		return "GET, HEAD, POST"
	}
	return "GET, HEAD"
}

// routes are the dashboard's paths under BasePath.
var routes = map[string]route{
	"":       {get: (*handler).overview},
	"dead":   {get: (*handler).deadList},
	"event":  {get: (*handler).event},
	"replay": {get: (*handler).replayPreview, post: (*handler).replay},
	"purge":  {get: (*handler).purgePreview},
	"types":  {get: (*handler).types},
	"inbox":  {get: (*handler).inbox},
}

// post runs a mutation after the security checks: mutations enabled,
// same origin, CSRF token.
func (h *handler) post(w http.ResponseWriter, r *http.Request, action pageFunc) {
	if !h.cfg.AllowMutations {
		h.fail(w, r, nil, http.StatusForbidden, "the dashboard is read-only: mutations are not enabled")
		return
	}
	if err := h.cop.Check(r); err != nil {
		h.log.WarnContext(r.Context(), "outbox dashboard: cross-origin POST refused",
			"path", trunc(100, r.URL.Path), "origin", trunc(100, r.Header.Get("Origin")))
		h.fail(w, r, nil, http.StatusForbidden, "cross-origin request refused")
		return
	}
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct != "application/x-www-form-urlencoded" {
		// ParseForm reads no other body: a multipart form's token would
		// look missing.
		h.fail(w, r, nil, http.StatusUnsupportedMediaType, "send the form as application/x-www-form-urlencoded, as the dashboard's pages do")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, int64(maxFormBytes))
	if err := r.ParseForm(); err != nil {
		h.fail(w, r, nil, http.StatusBadRequest, "bad form: "+err.Error())
		return
	}
	if !h.csrf.valid(r) {
		h.log.WarnContext(r.Context(), "outbox dashboard: POST without a valid CSRF token refused", "path", r.URL.Path)
		h.fail(w, r, nil, http.StatusForbidden, "missing or invalid CSRF token: reload the page and try again")
		return
	}
	sel, err := postDB(r)
	if err != nil {
		h.fail(w, r, nil, http.StatusBadRequest, err.Error())
		return
	}
	src, err := h.source(sel)
	if err != nil {
		h.fail(w, r, nil, http.StatusNotFound, err.Error())
		return
	}
	h.run(action, w, r, src)
}

// run serves the page, or runs the action, fn with its database work
// bounded by Config.QueryTimeout.
func (h *handler) run(fn pageFunc, w http.ResponseWriter, r *http.Request, src *source) {
	ctx, cancel := withQueryTimeout(r.Context(), h.cfg.QueryTimeout)
	defer cancel()
	fn(h, w, r.WithContext(ctx), src)
}

// postDB returns the db parameter of a POST: the form's, else the URL
// query's (a script may post to replay?db=…), never the first database
// when they name two.
func postDB(r *http.Request) (url.Values, error) {
	form, query := r.PostForm["db"], r.URL.Query()["db"]
	switch {
	case len(form) > 0 && len(query) > 0 && form[0] != query[0]:
		return nil, errors.New("the form and the URL name different databases (db)")
	case len(form) > 0:
		return url.Values{"db": form[:1]}, nil
	}
	return url.Values{"db": query}, nil
}

// source returns the database named by the db parameter (the first one
// when absent).
func (h *handler) source(v url.Values) (*source, error) {
	name := v.Get("db")
	if name == "" {
		return h.sources[0], nil
	}
	if s, ok := h.byName[name]; ok {
		return s, nil
	}
	if len(name) > maxNameLen {
		name = name[:maxNameLen] + "…"
	}
	return nil, fmt.Errorf("no database named %q", name)
}

// Input bounds.
const (
	// maxQueryLen bounds the query of a GET. The largest one a page
	// makes is the replay preview of a full page of selected events:
	// maxSelected ids of up to core.MaxEventIDLen characters, each
	// character up to 4 bytes that the URL escapes to 3 bytes each, as
	// "id=…&": 500 × 436 = 218,000 bytes, besides the filter fields. It
	// fits net/http's default limit on a request's header (1 MiB).
	maxQueryLen = maxSelected*(len("id=&")+core.MaxEventIDLen*utf8.UTFMax*3) + 16<<10
	// maxFormBytes bounds the form of a POST. The replay's confirmation
	// form carries the fields of its preview's query, encoded alike, and
	// a token: whatever the preview took fits.
	maxFormBytes = maxQueryLen + 16<<10
)
