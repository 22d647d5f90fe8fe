package prometheus_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// dashboard is the part of the Grafana dashboard the tests look at.
type dashboard struct {
	UID        string `json:"uid"`
	Title      string `json:"title"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		ID         int    `json:"id"`
		Type       string `json:"type"`
		Title      string `json:"title"`
		Datasource *struct {
			UID string `json:"uid"`
		} `json:"datasource"`
		GridPos struct {
			H, W, X, Y int
		} `json:"gridPos"`
		Targets []struct {
			Expr  string `json:"expr"`
			RefID string `json:"refId"`
		} `json:"targets"`
	} `json:"panels"`
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("dashboards", "outbox.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	return d
}

// TestDashboardShape checks what an import into Grafana relies on: a uid,
// a data source variable every panel queries through, unique panel ids,
// panels within the 24 columns that do not overlap, and the panels the
// operators look for.
func TestDashboardShape(t *testing.T) {
	d := readDashboard(t)
	if d.UID == "" || d.Title == "" {
		t.Error("the dashboard has no uid or title")
	}
	var hasDS bool
	for _, v := range d.Templating.List {
		if v.Name == "datasource" && v.Type == "datasource" && v.Query == "prometheus" {
			hasDS = true
		}
	}
	if !hasDS {
		t.Error("no templated Prometheus data source variable named datasource")
	}
	ids := map[int]bool{}
	titles := map[string]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d repeated", p.ID)
		}
		ids[p.ID] = true
		titles[p.Title] = true
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q does not query the ${datasource} variable", p.Title)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
	}
	for _, want := range []string{"Deliveries by outcome", "Commit → listener", "Listener duration", "Queue depths",
		"Oldest pending event age", "DONE batch size", "DONE write time", "Claim time", "Hot drops", "Lease losses",
		"Dead letters", "Blocked ordering keys", "Put-offs (relay outage)", "Relay brokers", "Relay full destinations"} {
		if !titles[want] {
			t.Errorf("no panel %q", want)
		}
	}
	for i, p := range d.Panels {
		g := p.GridPos
		if g.W <= 0 || g.H <= 0 || g.X < 0 || g.Y < 0 || g.X+g.W > 24 {
			t.Errorf("panel %q: gridPos %+v is not within the 24 columns", p.Title, g)
		}
		for _, q := range d.Panels[:i] {
			o := q.GridPos
			if g.X < o.X+o.W && o.X < g.X+g.W && g.Y < o.Y+o.H && o.Y < g.Y+g.H {
				t.Errorf("panels %q %+v and %q %+v overlap", q.Title, o, p.Title, g)
			}
		}
	}
}

// TestDashboardPromQL has promtool parse every query of the dashboard, as
// recording rules with Grafana's variables replaced.
func TestDashboardPromQL(t *testing.T) {
	tool := promtool(t)
	d := readDashboard(t)
	grafana := strings.NewReplacer("$__rate_interval", "5m", "$job", ".*", "$store", ".*")
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	n := 0
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			q, _ := json.Marshal(grafana.Replace(tg.Expr)) // a JSON string is a YAML double-quoted one
			fmt.Fprintf(&rules, "      - record: dashboard:panel%d:%s\n        expr: %s\n", p.ID, tg.RefID, q)
			n++
		}
	}
	if n < 20 {
		t.Fatalf("only %d queries", n)
	}
	path := filepath.Join(t.TempDir(), "dashboard-rules.yml")
	if err := os.WriteFile(path, []byte(rules.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(tool, "check", "rules", path).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules on the dashboard's queries: %v\n%s", err, out)
	}
}
