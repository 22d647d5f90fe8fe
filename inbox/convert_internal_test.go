package inbox

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/outbox-go/outbox/internal/inboxrow"
)

// fromRow copies every field of the stored row: Record and the row type
// have the same fields, and a field added to one but not the other (or
// not copied) fails here rather than reading as zero in production.
func TestFromRowCopiesEveryField(t *testing.T) {
	var row inboxrow.Record
	rv := reflect.ValueOf(&row).Elem()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := range rv.NumField() {
		f := rv.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString(rv.Type().Field(i).Name)
		case reflect.Int, reflect.Int8:
			f.SetInt(int64(i + 1))
		case reflect.Slice:
			f.SetBytes([]byte(rv.Type().Field(i).Name))
		case reflect.Struct:
			f.Set(reflect.ValueOf(at.Add(time.Duration(i) * time.Hour)))
		case reflect.Interface:
			f.Set(reflect.ValueOf(errors.New("decode")))
		default:
			t.Fatalf("field %s: kind %s not covered by this test", rv.Type().Field(i).Name, f.Kind())
		}
	}
	// A due time after the retry time is the record's NextAttemptAt
	// (TestFromRowNextAttemptIsTheLater); here every field is copied.
	row.DueAt = row.NextAttemptAt.Add(-time.Minute)
	rec := fromRow(row)
	recV := reflect.ValueOf(rec)
	if recV.NumField() != rv.NumField() {
		t.Fatalf("Record has %d fields, the stored row %d", recV.NumField(), rv.NumField())
	}
	for i := range rv.NumField() {
		name := rv.Type().Field(i).Name
		got := recV.FieldByName(name)
		if !got.IsValid() {
			t.Errorf("Record has no field %s", name)
			continue
		}
		want := rv.Field(i)
		if got.Kind() != want.Kind() || !reflect.DeepEqual(got.Interface(), want.Convert(got.Type()).Interface()) {
			t.Errorf("%s: got %v, want %v", name, got, want)
		}
	}
}

func TestRowKeys(t *testing.T) {
	if got := rowKeys(nil); got != nil {
		t.Errorf("rowKeys(nil) = %v", got)
	}
	keys := []Key{{"a", "1"}, {"b", "2"}}
	got := rowKeys(keys)
	if len(got) != 2 || got[0] != (inboxrow.Key{Source: "a", MessageID: "1"}) || got[1] != (inboxrow.Key{Source: "b", MessageID: "2"}) {
		t.Errorf("rowKeys = %v", got)
	}
}

// A Processing message is claimed at neither its retry time nor its due
// time before the other: NextAttemptAt is the later of the two.
func TestFromRowNextAttemptIsTheLater(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, c := range []struct{ next, due, want time.Time }{
		{at, time.Time{}, at},
		{at, at.Add(time.Hour), at.Add(time.Hour)},
		{at.Add(time.Hour), at, at.Add(time.Hour)},
	} {
		rec := fromRow(inboxrow.Record{NextAttemptAt: c.next, DueAt: c.due})
		if !rec.NextAttemptAt.Equal(c.want) || !rec.DueAt.Equal(c.due) {
			t.Errorf("next %v, due %v: NextAttemptAt %v, DueAt %v; want %v", c.next, c.due, rec.NextAttemptAt, rec.DueAt, c.want)
		}
	}
}
