package postgres_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/jsoncol"
	"github.com/outbox-go/outbox/internal/testdb"
	"github.com/outbox-go/outbox/jdbcstore"
)

// jsonb keeps a number as numeric, written out in full: the store refuses
// the numbers the server cannot hold exactly where the server would
// (before it, so the caller's transaction stays usable), and its estimate
// of a number's stored length is never below the server's.
func TestPostgresJSONBNumbersMatchTheServer(t *testing.T) {
	t.Parallel()
	db := testdb.Postgres(t)
	ctx := t.Context()
	for _, n := range []string{
		"0", "-0", "-0.0", "1.10", "1E+2", "12.34e-2", "5e-1", "123456789012345678901234567890",
		"1e131071", "1e131072", "1.5e131071", "100e131069", "0.001e131074", "0.001e131075",
		"0e131072", "0e200000", "1e200000", "1e-16383", "1e-16384", "10e-16384", "0.5e-16383",
		"12345e-16386", "0.0e-16384", "0e-20000", "-1e-16383", "1e99999999999999999999",
		"1e-99999999999999999999", "0.000000001e+16392", "0e1073741822", "0e1073741823", "-0.0E+2000000000",
	} {
		f := jsoncol.Inspect([]byte(n))
		var length int
		err := db.GetContext(ctx, &length, `SELECT length(($1::text)::jsonb::text)`, n)
		serverRefuses := err != nil
		if err != nil && !strings.Contains(err.Error(), "22003") { // numeric_value_out_of_range
			t.Errorf("%s: the server failed otherwise: %v", n, err)
			continue
		}
		if f.NumericOverflow != serverRefuses {
			t.Errorf("%s: overflow %v, the server refuses it: %v (%v)", n, f.NumericOverflow, serverRefuses, err)
		}
		if !serverRefuses && int64(len(n))+f.NumericGrowth < int64(length) {
			t.Errorf("%s: stored length estimated at %d, the server's is %d", n, int64(len(n))+f.NumericGrowth, length)
		}
	}
}

// A small payload whose numbers jsonb would store as huge text (10,000
// × 1e1000 is 70 KB as written, 10 MB stored: the claims that read it back
// failed with out of memory, so nothing else was delivered by the poller),
// or that overflow numeric, is refused with core.ErrInvalidJSON before the
// server; the transaction stays usable.
func TestPostgresRefusesJSONBNumberBlowUp(t *testing.T) {
	t.Parallel()
	st := newPGStore(t, testdb.Postgres(t), jdbcstore.Config{})
	ctx := t.Context()
	tx, err := st.DB().BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck
	bomb := "[" + strings.TrimSuffix(strings.Repeat("1e1000,", 10000), ",") + "]"
	for i, payload := range []string{bomb, `{"x":1e200000}`, `{"x":1e-20000}`, `{"a":"\u0000"}`, `["\ud800"]`} {
		env := mustBuild(t, core.NewEvent("T").ID(fmt.Sprintf("bad-%d", i)).PayloadJSONString(payload))
		if err := st.Insert(ctx, tx, env, testLease); !errors.Is(err, core.ErrInvalidJSON) {
			t.Errorf("payload %.40s…: err = %v, want core.ErrInvalidJSON", payload, err)
		}
	}
	// Every float64 Go's encoding/json writes is fine, and so are 1,000
	// numbers of 300 digits.
	fine := "[1.7976931348623157e+308,5e-324,-2.2250738585072014e-308," + strings.TrimSuffix(strings.Repeat("1e300,", 1000), ",") + "]"
	if err := st.Insert(ctx, tx, mustBuild(t, core.NewEvent("T").ID("fine").PayloadJSONString(fine)), testLease); err != nil {
		t.Fatalf("insert after the refusals, in the same transaction: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}
