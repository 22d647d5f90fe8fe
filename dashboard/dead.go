package dashboard

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/jsonindent"
	"github.com/outbox-go/outbox/jdbcstore"
)

type deadView struct {
	Q       deadQuery
	Errors  []string
	Events  []jdbcstore.DeadSummary
	Next    string // the after cursor of the next page, "" on the last
	IsFirst bool
	Spaced  bool // the type or tenant filter starts or ends with a space
}

// deadList lists DEAD events matching the filter, a page at a time.
func (h *handler) deadList(w http.ResponseWriter, r *http.Request, src *source) {
	q, err := parseDeadQuery(r.URL.Query(), h.cfg.PageSize, h.cfg.Now())
	v := deadView{Q: q, IsFirst: q.After == "", Spaced: spaced(q.Type) || spaced(q.Tenant)}
	if err != nil {
		v.Errors = strings.Split(err.Error(), "\n")
		h.render(w, r, src, http.StatusBadRequest, "dead", &page{Title: "Dead letters", Nav: "dead", Data: v})
		return
	}
	recs, err := src.store.ListDeadSummaries(r.Context(), q.filter, q.After, q.Limit)
	if err != nil {
		h.failStore(w, r, src, "listing DEAD events", err)
		return
	}
	v.Events = recs
	if len(recs) == q.Limit {
		v.Next = recs[len(recs)-1].ID
	}
	h.render(w, r, src, http.StatusOK, "dead", &page{Title: "Dead letters", Nav: "dead", Data: v})
}

// spaced reports whether s starts or ends with white space.
func spaced(s string) bool { return s != strings.TrimSpace(s) }

// maxPayloadShown bounds the payload bytes an event page shows.
const maxPayloadShown = 256 << 10

// maxIndentedShown bounds an indented JSON payload. Indentation grows
// with the nesting depth, so valid JSON of nested arrays indents to the
// square of its size (234 KiB to 2.4 GB): a payload that would indent
// past this bound is shown as stored.
const maxIndentedShown = 4 * maxPayloadShown

type header struct{ Name, Value string }

type eventView struct {
	R           core.Record
	Now         time.Time
	Headers     []header
	HeadersErr  string
	Payload     string // pretty JSON or base64, when shown
	PayloadNote string
	PayloadSize int
	Cut         bool
	IsDead      bool
}

// event shows one event in full.
func (h *handler) event(w http.ResponseWriter, r *http.Request, src *source) {
	id := r.URL.Query().Get("id")
	if id == "" {
		h.fail(w, r, src, http.StatusBadRequest, "missing id")
		return
	}
	if err := checkText(id, maxIDLen); err != nil {
		h.fail(w, r, src, http.StatusBadRequest, "id: "+err.Error())
		return
	}
	rec, err := src.store.Get(r.Context(), id)
	if errors.Is(err, core.ErrNotFound) {
		h.fail(w, r, src, http.StatusNotFound, "no event with id "+strconv.Quote(id))
		return
	}
	if err != nil {
		h.failStore(w, r, src, "reading the event", err)
		return
	}
	v := eventView{R: rec, Now: h.cfg.Now(), PayloadSize: len(rec.Payload), IsDead: rec.Status == core.StatusDead}
	headers, herr := core.DecodeHeaders(rec.HeadersJSON)
	if herr != nil {
		v.HeadersErr = "headers cannot be decoded: " + herr.Error()
	}
	for _, k := range slices.Sorted(maps.Keys(headers)) {
		hv := headers[k]
		if !h.cfg.ShowPayloads {
			hv = ""
		}
		v.Headers = append(v.Headers, header{Name: k, Value: hv})
	}
	if h.cfg.ShowPayloads {
		v.Payload, v.PayloadNote, v.Cut = showPayload(rec)
	}
	h.render(w, r, src, http.StatusOK, "event", &page{Title: "Event " + vis(trunc(40, rec.ID)), Nav: "dead", Data: v})
}

// showPayload renders a payload for people: indented JSON (as stored
// when indented it would exceed maxIndentedShown; its first
// maxPayloadShown bytes as stored when longer), or base64.
func showPayload(rec core.Record) (text, note string, cut bool) {
	p := rec.Payload
	if len(p) == 0 {
		return "", "empty", false
	}
	if rec.PayloadKind == core.PayloadJSON && json.Valid(p) {
		if len(p) > maxPayloadShown {
			return strings.ToValidUTF8(string(p[:maxPayloadShown]), "\uFFFD"), "JSON as stored", true
		}
		if b, ok := jsonindent.Indent(p, "  ", 0, maxIndentedShown); ok {
			return strings.ToValidUTF8(string(b), "\uFFFD"), "JSON", false
		}
		return strings.ToValidUTF8(string(p), "\uFFFD"), "JSON as stored (indented it would take more than 1 MiB)", false
	}
	if len(p) > maxPayloadShown {
		p, cut = p[:maxPayloadShown], true
	}
	return base64.StdEncoding.EncodeToString(p), "base64", cut
}
