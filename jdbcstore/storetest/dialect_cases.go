package storetest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/jdbcstore"
)

// testDialect checks the parts of the Dialect contract the store relies on
// without a database, and that the harness's stores use the dialect.
func (s *suite) testDialect(t *testing.T) {
	t.Parallel()
	d := s.h.Dialect
	if name := d.Name(); name == "" || strings.ToLower(name) != name {
		t.Errorf("Name() = %q, want a non-empty lowercase name", name)
	}
	if len(d.DriverNames()) == 0 {
		t.Error("DriverNames() is empty")
	}
	for _, n := range d.DriverNames() {
		if got, err := jdbcstore.Lookup(n); err != nil || got != d {
			t.Errorf("Lookup(%q) = %v, %v; want the dialect registered (call jdbcstore.Register in init)", n, got, err)
		}
	}
	if c := d.Capabilities(); !c.SkipLocked && !c.Returning {
		t.Errorf("Capabilities() = %+v: claims need SkipLocked or Returning", c)
	}
	if q := d.QuoteIdent("outbox_event"); !strings.Contains(q, "outbox_event") {
		t.Errorf("QuoteIdent(outbox_event) = %q", q)
	}

	// Times: nil is the zero time; an encoded instant decodes to itself
	// truncated to microseconds; garbage gives an error, never a panic.
	if got, err := d.DecodeTime(nil); err != nil || !got.IsZero() {
		t.Errorf("DecodeTime(nil) = %v, %v; want the zero time", got, err)
	}
	for _, v := range []any{struct{}{}, []int{1}, float64(-1.5)} {
		_, _ = d.DecodeTime(v)
	}
	if d.EncodeTime(t0) == nil {
		t.Error("EncodeTime returned nil")
	}

	// Payloads: unknown kinds are refused; decoding never panics.
	if _, err := d.EncodePayload(core.PayloadKind(200), []byte("x")); err == nil {
		t.Error("EncodePayload accepted an unknown payload kind")
	}
	for _, kind := range []core.PayloadKind{core.PayloadJSON, core.PayloadBytes, core.PayloadKind(200)} {
		for _, v := range []any{nil, "", []byte{0xff, 0x00}, int64(7), time.Unix(0, 0), struct{}{}} {
			if p, err := d.DecodePayload(kind, v); err == nil && p == nil {
				t.Errorf("DecodePayload(%d, %T) returned nil bytes without an error", kind, v)
			}
		}
	}

	// Errors the driver never produced are ClassOther.
	for _, err := range []error{nil, errors.New("plain"), core.ErrDuplicateEvent} {
		if c := d.Classify(err); c != jdbcstore.ClassOther {
			t.Errorf("Classify(%v) = %v, want other", err, c)
		}
	}

	// Both schema templates exist; the stores use the dialect.
	if strings.TrimSpace(d.OutboxSchema()) == "" || strings.TrimSpace(d.InboxSchema()) == "" {
		t.Error("OutboxSchema or InboxSchema is empty")
	}
	st := s.newStore(t, nil, jdbcstore.Config{})
	if st.Dialect() != d {
		t.Errorf("NewStore built a store on dialect %v, want %v", st.Dialect().Name(), d.Name())
	}
	if sql := st.SchemaSQL(); strings.Contains(sql, "{{") || !strings.Contains(sql, d.QuoteIdent(st.Table())) {
		t.Errorf("rendered schema does not use the quoted table:\n%s", sql)
	}
	// A statement the database refuses is a driver error of neither
	// class: a dialect calling every driver error busy would have the
	// store retry it until its timeout.
	if _, err := st.DB().ExecContext(t.Context(), "SELECT storetest_no_column FROM storetest_no_table"); err == nil {
		t.Error("a SELECT from a table that does not exist succeeded")
	} else if c := d.Classify(err); c != jdbcstore.ClassOther {
		t.Errorf("Classify(%v) = %v, want other (the statement was refused: no retry, no duplicate)", err, c)
	}
}
