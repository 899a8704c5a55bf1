package main

import (
	"os"
	"path/filepath"
	"testing"
)

const monitoring = "../../../config/components/monitoring/"

// TestRepositoryFiles: the engine's alerts pass, and the dashboard's queries
// parse and select named metrics.
func TestRepositoryFiles(t *testing.T) {
	n, errs := checkRules(monitoring + "prometheusrule.yaml")
	if len(errs) > 0 || n == 0 {
		t.Fatalf("prometheusrule.yaml: %d rules, %v", n, errs)
	}
	for _, f := range []string{"engine-dashboard.json", "prometheusrule.yaml"} {
		names, err := metricsOf(monitoring + f)
		if err != nil || len(names) == 0 {
			t.Errorf("%s: %v %v", f, names, err)
		}
	}
}

// TestRulesRejected: the checks are live; each broken rule file is refused.
func TestRulesRejected(t *testing.T) {
	for name, rules := range map[string]string{
		"bad PromQL":      "groups:\n- name: g\n  rules:\n  - alert: A\n    expr: sum(rate(x[5m]) > 1\n",
		"bad template":    "groups:\n- name: g\n  rules:\n  - alert: A\n    expr: up == 0\n    annotations:\n      summary: '{{ $labels.pod '\n",
		"unknown field":   "groups:\n- name: g\n  rules:\n  - alert: A\n    expr: up == 0\n    fro: 5m\n",
		"duplicate rules": "groups:\n- name: g\n  rules:\n  - alert: A\n    expr: up == 0\n  - alert: A\n    expr: up == 1\n",
		"PrometheusRule":  "apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nspec:\n  groups:\n  - name: g\n    rules:\n    - alert: A\n      expr: up ==\n",
	} {
		t.Run(name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "rules.yaml")
			if err := os.WriteFile(f, []byte(rules), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, errs := checkRules(f); len(errs) == 0 {
				t.Errorf("accepted:\n%s", rules)
			}
		})
	}
}

func TestSelectedMetrics(t *testing.T) {
	got, err := selectedMetrics(`histogram_quantile(0.99, sum by (le) (rate(a_bucket{namespace=~"$namespace"}[$__rate_interval]))) / on() b or vector(0)`)
	if err != nil || len(got) != 2 || got[0] != "a_bucket" || got[1] != "b" {
		t.Errorf("got %v, %v", got, err)
	}
	if _, err := selectedMetrics(`sum({job="x"})`); err == nil {
		t.Error("a selector without a metric name is accepted")
	}
	if _, err := selectedMetrics(`rate(x[5m]`); err == nil {
		t.Error("a broken query is accepted")
	}
}
