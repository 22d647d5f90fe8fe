package dashboard_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/outbox-go/outbox/dashboard"
	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
)

// Mount the dashboard in the application's own server, under /ops/outbox/,
// behind the application's authentication.
func Example() {
	dir, _ := os.MkdirTemp("", "dashboard-example-")
	defer os.RemoveAll(dir)
	db, err := sqlite.Open(filepath.Join(dir, "app.db"))
	if err != nil {
		panic(err)
	}
	defer db.Close()
	store, err := jdbcstore.New(db, jdbcstore.Config{})
	if err != nil {
		panic(err)
	}
	if err := store.ApplySchema(context.Background()); err != nil {
		panic(err)
	}

	requireOperator := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("X-Operator") == "" { // your real authentication here
				http.Error(w, "forbidden", http.StatusForbidden)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	h, err := dashboard.New(dashboard.Config{
		Store:          store,
		BasePath:       "/ops/outbox/",
		AllowMutations: true, // replays need a CSRF token and a same-origin POST
		Middleware:     requireOperator,
	})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ops/outbox/", h)

	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, operator := range []string{"", "ada"} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/ops/outbox/", nil)
		req.Header.Set("X-Operator", operator)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		res.Body.Close()
		fmt.Println(res.Status)
	}
	// Output:
	// 403 Forbidden
	// 200 OK
}
