package dashboard

import (
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/outbox-go/outbox/inbox"
)

// inboxPayloadShown is how many characters of a payload the inbox list
// shows (with ShowPayloads), out of the first inboxPayloadRead bytes,
// the most it reads of one (a UTF-8 character takes up to 4).
const (
	inboxPayloadShown = 200
	inboxPayloadRead  = 4 * inboxPayloadShown
)

type inboxRow struct {
	R       inbox.Record
	Payload string
}

type inboxView struct {
	Now        time.Time
	Status     string // "dead" or "pending"
	Counts     []statusRow
	Rows       []inboxRow
	Limit      int
	IsFirst    bool
	NextSource string
	NextID     string
	Errors     []string
}

// inbox lists the dead or pending messages of the selected database's
// inbox, a page at a time.
func (h *handler) inbox(w http.ResponseWriter, r *http.Request, src *source) {
	if src.inbox == nil {
		h.fail(w, r, src, http.StatusNotFound, "no inbox is configured for this database")
		return
	}
	q := r.URL.Query()
	v := inboxView{Now: h.cfg.Now(), Status: q.Get("status"), Limit: h.cfg.PageSize}
	status := inbox.StatusDead
	switch v.Status {
	case "", "dead":
		v.Status = "dead"
	case "pending":
		status = inbox.StatusProcessing
	default:
		v.Errors = append(v.Errors, "status must be dead or pending")
	}
	after := inbox.Key{Source: q.Get("after_source"), MessageID: q.Get("after_id")}
	v.IsFirst = after == inbox.Key{}
	if (after.Source == "") != (after.MessageID == "") {
		v.Errors = append(v.Errors, "after_source and after_id go together")
	}
	for name, s := range map[string]string{"after_source": after.Source, "after_id": after.MessageID} {
		if err := checkText(s, inbox.MaxIDLen); err != nil {
			v.Errors = append(v.Errors, name+": "+err.Error())
		}
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxPageSize {
			v.Errors = append(v.Errors, "limit must be 1.."+strconv.Itoa(MaxPageSize))
		}
		v.Limit = n
	}
	if len(v.Errors) > 0 {
		h.render(w, r, src, http.StatusBadRequest, "inbox", &page{Title: "Inbox", Nav: "inbox", Data: v})
		return
	}
	counts, err := src.inbox.CountByStatus(r.Context())
	if err != nil {
		h.failStore(w, r, src, "counting inbox messages", err)
		return
	}
	for _, s := range []inbox.Status{inbox.StatusSeen, inbox.StatusProcessing, inbox.StatusDone, inbox.StatusDead} {
		v.Counts = append(v.Counts, statusRow{Name: s.String(), Code: int(s), Count: counts[s]})
	}
	preview := 0 // hidden payloads are not read
	if h.cfg.ShowPayloads {
		preview = inboxPayloadRead
	}
	recs, err := src.inbox.ListPreview(r.Context(), status, after, v.Limit, preview)
	if err != nil {
		h.failStore(w, r, src, "listing inbox messages", err)
		return
	}
	for _, rec := range recs {
		row := inboxRow{R: rec}
		if h.cfg.ShowPayloads {
			row.Payload = payloadPreview(rec.Payload)
		}
		v.Rows = append(v.Rows, row)
	}
	if len(recs) == v.Limit {
		last := recs[len(recs)-1]
		v.NextSource, v.NextID = last.Source, last.MessageID
	}
	h.render(w, r, src, http.StatusOK, "inbox", &page{Title: "Inbox", Nav: "inbox", Data: v})
}

// payloadPreview is the start of a payload: its text when it is UTF-8
// (a character the cut split aside), its base64 otherwise.
func payloadPreview(p []byte) string {
	if len(p) > inboxPayloadRead {
		p = p[:inboxPayloadRead]
	}
	if len(p) == inboxPayloadRead {
		// The cut may have split the last character: drop its start.
		for i := 1; i < utf8.UTFMax && i <= len(p); i++ {
			if utf8.RuneStart(p[len(p)-i]) {
				if !utf8.FullRune(p[len(p)-i:]) {
					p = p[:len(p)-i]
				}
				break
			}
		}
	}
	s := string(p)
	if !utf8.Valid(p) {
		s = "base64:" + base64.StdEncoding.EncodeToString(p)
	}
	return trunc(inboxPayloadShown, strings.ToValidUTF8(s, "�"))
}
