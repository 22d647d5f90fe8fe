package mysql_test

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/testdb"
	"github.com/outbox-go/outbox/jdbcstore"
	mysqldialect "github.com/outbox-go/outbox/jdbcstore/mysql"
)

// nested returns a document of depth levels of arrays around a number.
func nested(depth int) string {
	return strings.Repeat("[", depth) + "1" + strings.Repeat("]", depth)
}

// The dialect refuses, with core.ErrInvalidJSON and before the server, the
// valid JSON a JSON column refuses (on MariaDB a CHECK constraint error
// the caller could not tell from another, 4025): a lone surrogate escape,
// nesting deeper than MaxJSONDepth. What it accepts the server stores, and
// what MariaDB refuses the dialect refuses; the transaction stays usable.
func TestMySQLRefusesJSONTheColumnRefuses(t *testing.T) {
	t.Parallel()
	db := testdb.MySQL(t)
	st := newMySQLStore(t, db, jdbcstore.Config{})
	ctx := t.Context()
	maria := serverFlavor(t) == "mariadb"
	// MariaDB's JSON_VALID accepts numbers of any size; MySQL 8 refuses
	// those beyond a double's range, so the dialect does on both.
	floats := map[string]bool{`[1e131071]`: false, `[1e309]`: false, `[1.7976931348623157e308]`: true, `[1e-400]`: true}
	docs := map[string]bool{ // document → the dialect accepts it
		`["\ud800"]`:                                        false,
		`{"a":"\udc00"}`:                                    false,
		`["\ud83d\ude00","\\ud800"]`:                        true,
		`{"a":"\u0000"}`:                                    true,
		nested(mysqldialect.MaxJSONDepth):                   true,
		nested(mysqldialect.MaxJSONDepth + 1):               false,
		`{"a":` + nested(mysqldialect.MaxJSONDepth-1) + `}`: true,
		`{"a":` + nested(mysqldialect.MaxJSONDepth) + `}`:   false,
	}
	maps.Copy(docs, floats)
	tx, err := st.DB().BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck
	i := 0
	for doc, ok := range docs {
		i++
		env := mustBuild(t, core.NewEvent("T").ID(fmt.Sprintf("json-%d", i)).PayloadJSONString(doc))
		err := st.Insert(ctx, tx, env, testLease)
		if ok != (err == nil) || err != nil && !errors.Is(err, core.ErrInvalidJSON) {
			t.Errorf("%.50s: insert = %v, want accepted %v (or core.ErrInvalidJSON)", doc, err, ok)
		}
		if _, isFloat := floats[doc]; maria && !isFloat {
			var valid bool
			if err := db.GetContext(ctx, &valid, "SELECT JSON_VALID(?)", doc); err != nil {
				t.Fatal(err)
			}
			if valid != ok {
				t.Errorf("%.50s: the dialect accepts it: %v, MariaDB's JSON_VALID: %v", doc, ok, valid)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}
