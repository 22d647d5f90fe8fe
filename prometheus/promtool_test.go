package prometheus_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// promtool returns the path of promtool (the Debian package prometheus
// has it). Without it the test skips, or fails when CI=true.
func promtool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("promtool not found (apt-get install prometheus): %v", err)
		}
		t.Skipf("promtool not found (apt-get install prometheus to check the alert rules): %v", err)
	}
	return path
}

// TestAlertRulesCheck runs promtool check rules on the alert rules.
func TestAlertRulesCheck(t *testing.T) {
	out, err := exec.Command(promtool(t), "check", "rules", filepath.Join("alerts", "outbox-rules.yml")).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

// TestAlertRulesFire runs the rules' unit tests (alerts/outbox-rules_test.yml):
// each alert fires on the series it watches, with its labels and
// annotations, and not before its `for`.
func TestAlertRulesFire(t *testing.T) {
	cmd := exec.Command(promtool(t), "test", "rules", "outbox-rules_test.yml")
	cmd.Dir = "alerts"
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}
