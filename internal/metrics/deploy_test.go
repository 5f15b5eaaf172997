package metrics

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"go.yaml.in/yaml/v3"
)

// The files shipped in deploy/, relative to this package.
var (
	dashboardFile  = filepath.Join("..", "..", "deploy", "grafana", "toolplane.json")
	rulesFile      = filepath.Join("..", "..", "deploy", "prometheus", "alerts.yml")
	rulesTestsFile = filepath.Join("..", "..", "deploy", "prometheus", "alerts_test.yml")
)

var metricName = regexp.MustCompile(`\btoolplane_[a-z0-9_]+`)

// gathered answers the families a deployment that did everything
// registers, by name and type.
func gathered(t *testing.T) map[string]dto.MetricType {
	t.Helper()
	m := exercise(t)
	fams, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]dto.MetricType{}
	for _, f := range fams {
		out[f.GetName()] = f.GetType()
	}
	return out
}

// dashboardQueries answers every query of the dashboard: its panels'
// targets and its variables'.
func dashboardQueries(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var out []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			out = append(out, tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if v.Definition != "" {
			out = append(out, v.Definition)
		}
	}
	if len(out) < 20 {
		t.Fatalf("the dashboard has only %d queries", len(out))
	}
	return out
}

// ruleExprs answers every alert's expression.
func ruleExprs(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Expr        string            `yaml:"expr"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	out := map[string]string{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("alert %s lacks a summary or a description", r.Alert)
			}
			out[r.Alert] = r.Expr
		}
	}
	return out
}

// Every metric the dashboard, the alert rules and the rules' tests name
// is one toolplane registers, of the type its use needs (a _bucket is a
// histogram's): the dashboard and the alerts cannot drift from the code.
func TestDeployNamesRegisteredMetrics(t *testing.T) {
	t.Parallel()
	have := gathered(t)
	known := func(name string) bool {
		if _, ok := have[name]; ok {
			return true
		}
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok && have[base] == dto.MetricType_HISTOGRAM {
				return true
			}
		}
		return false
	}
	sources := map[string][]string{dashboardFile: dashboardQueries(t)}
	for alert, expr := range ruleExprs(t) {
		sources[rulesFile+" "+alert] = []string{expr}
	}
	tests, err := os.ReadFile(rulesTestsFile)
	if err != nil {
		t.Fatal(err)
	}
	sources[rulesTestsFile] = []string{string(tests)}
	used := map[string]bool{}
	for where, texts := range sources {
		for _, text := range texts {
			for _, name := range metricName.FindAllString(text, -1) {
				used[name] = true
				if known(name) {
					continue
				}
				t.Errorf("%s names %s, which toolplane does not register", where, name)
			}
		}
	}
	// The dashboard shows what the issue asks of it.
	for _, name := range []string{
		"toolplane_tool_calls_total", "toolplane_tool_call_seconds_bucket", "toolplane_call_stage_seconds_bucket",
		"toolplane_approvals_pending", "toolplane_approval_wait_seconds_bucket", "toolplane_uncertain_actions_open",
		"toolplane_breaker_state", "toolplane_bulkhead_saturation", "toolplane_spend_cents_total", "toolplane_authz_denials_total",
		"toolplane_audit_export_lag_seconds", "toolplane_trace_spans_dropped_total",
	} {
		if !used[name] {
			t.Errorf("neither the dashboard nor the rules use %s", name)
		}
	}
}

// Each alert the issue names is among the rules.
func TestDeployAlertsCoverTheIssue(t *testing.T) {
	t.Parallel()
	rules := ruleExprs(t)
	for _, alert := range []string{
		"ToolplaneToolErrorRate", "ToolplaneToolLatencyP99High", "ToolplaneBreakerOpen", "ToolplaneApprovalsBacklog",
		"ToolplaneUncertainActionsOpen", "ToolplaneAuditExportLagGrowing", "ToolplaneAuthzDenialSpike", "ToolplaneSpendSpike",
		"ToolplaneSpansDropped",
	} {
		if _, ok := rules[alert]; !ok {
			t.Errorf("no alert %s", alert)
		}
	}
	// Each alert has a case of its own in the rules' tests.
	tests, err := os.ReadFile(rulesTestsFile)
	if err != nil {
		t.Fatal(err)
	}
	for alert := range rules {
		if !strings.Contains(string(tests), "alertname: "+alert) {
			t.Errorf("alerts_test.yml tests nothing of %s", alert)
		}
	}
}

// promtool answers the path of promtool: under CI a missing promtool
// fails the test (CI installs Debian's prometheus package), elsewhere it
// skips.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool is not installed (apt-get install prometheus)")
		}
		t.Skip("promtool is not installed (apt-get install prometheus)")
	}
	return p
}

// The alert rules pass promtool's check and their unit tests, and every
// dashboard query is PromQL promtool parses.
func TestDeployPromtool(t *testing.T) {
	t.Parallel()
	bin := promtool(t)
	run := func(args ...string) {
		t.Helper()
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run("check", "rules", rulesFile)
	run("test", "rules", rulesTestsFile)

	// The dashboard's queries, Grafana's variables given values, as
	// recording rules: promtool parses each.
	vars := strings.NewReplacer("$__rate_interval", "5m", "$tool", ".*", "$organization", ".*")
	type rule struct {
		Record string `yaml:"record"`
		Expr   string `yaml:"expr"`
	}
	var rules []rule
	for _, q := range dashboardQueries(t) {
		if strings.HasPrefix(q, "label_values(") {
			continue // Grafana's own function, not PromQL
		}
		rules = append(rules, rule{Record: "dashboard:query", Expr: vars.Replace(q)})
	}
	b, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "dashboard_rules.yml")
	if err := os.WriteFile(f, b, 0o600); err != nil {
		t.Fatal(err)
	}
	run("check", "rules", f)
	if slices.ContainsFunc(rules, func(r rule) bool { return strings.Contains(r.Expr, "$") }) {
		t.Error("a dashboard query keeps a variable promtool cannot read")
	}
}
