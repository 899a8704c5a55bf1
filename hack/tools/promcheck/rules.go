package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"
)

// promql parses queries as Prometheus does by default.
var promql = parser.NewParser(parser.Options{})

// checkRules validates a rule file, or the spec of a PrometheusRule, as
// `promtool check rules` does, and returns the number of rules.
func checkRules(file string) (int, []error) {
	content, err := ruleGroups(file)
	if err != nil {
		return 0, []error{err}
	}
	// Legacy names: the rules must work on a Prometheus 2 too.
	groups, errs := rulefmt.Parse(content, false, model.LegacyValidation, promql, slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		return 0, errs
	}
	n := 0
	for _, g := range groups.Groups {
		n += len(g.Rules)
		seen := map[string]bool{}
		for _, r := range g.Rules {
			key := fmt.Sprintf("%s%s %v", r.Alert, r.Record, r.Labels)
			if seen[key] {
				errs = append(errs, fmt.Errorf("group %q: duplicate rule %s", g.Name, key))
			}
			seen[key] = true
		}
	}
	return n, errs
}

// ruleGroups returns the file's rule groups as a rule file: the spec of a
// PrometheusRule, or the file itself.
func ruleGroups(file string) ([]byte, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var obj struct {
		Kind string         `json:"kind"`
		Spec map[string]any `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &obj); err != nil {
		return nil, err
	}
	if obj.Kind != "PrometheusRule" {
		return b, nil
	}
	return yaml.Marshal(obj.Spec)
}
