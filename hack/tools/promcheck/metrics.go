package main

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"
)

// metricsOf returns the metric names selected by the queries of a Grafana
// dashboard (.json) or of a rule file or PrometheusRule.
func metricsOf(file string) ([]string, error) {
	var queries []string
	var err error
	if strings.HasSuffix(file, ".json") {
		queries, err = dashboardQueries(file)
	} else {
		queries, err = ruleQueries(file)
	}
	if err != nil {
		return nil, err
	}
	if len(queries) == 0 {
		return nil, fmt.Errorf("no queries")
	}
	var names []string
	for _, q := range queries {
		n, err := selectedMetrics(q)
		if err != nil {
			return nil, err
		}
		names = append(names, n...)
	}
	return names, nil
}

// selectedMetrics parses a query and returns the names of the metrics it
// selects. Every selector must name its metric: a query over "any metric
// with these labels" cannot be checked against what the engine exports.
func selectedMetrics(query string) ([]string, error) {
	expr, err := promql.ParseExpr(grafanaVariables(query))
	if err != nil {
		return nil, fmt.Errorf("query %q: %w", query, err)
	}
	var names []string
	for _, matchers := range parser.ExtractSelectors(expr) {
		name := ""
		for _, m := range matchers {
			if m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual {
				name = m.Value
			}
		}
		if name == "" {
			return nil, fmt.Errorf("query %q: a selector without a metric name", query)
		}
		names = append(names, name)
	}
	return names, nil
}

// grafanaVariable is a dashboard variable: $name or ${name}.
var grafanaVariable = regexp.MustCompile(`\$\{?(__rate_interval|__interval|__range)\}?`)

// grafanaVariables replaces Grafana's interval variables, which are
// durations, with one; the dashboard's own variables stay inside label
// matchers' strings, where PromQL accepts them as they are.
func grafanaVariables(q string) string {
	return grafanaVariable.ReplaceAllString(q, "5m")
}

// labelValues is a Grafana variable query: label_values(QUERY, label).
var labelValues = regexp.MustCompile(`^label_values\((.+),\s*[a-zA-Z_]\w*\)$`)

// dashboardQueries returns the expressions of every panel's targets
// (rows included) and of the query variables.
func dashboardQueries(file string) ([]string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var d struct {
		Panels     []panel `json:"panels"`
		Templating struct {
			List []struct {
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, err
	}
	var out []string
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, t := range p.Targets {
				out = append(out, t.Expr)
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(string)
		if m, ok := v.Query.(map[string]any); ok {
			q, _ = m["query"].(string)
		}
		sub := labelValues.FindStringSubmatch(q)
		if sub == nil {
			return nil, fmt.Errorf("variable query %q: want label_values(QUERY, label)", q)
		}
		out = append(out, sub[1])
	}
	return out, nil
}

type panel struct {
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

// ruleQueries returns the expr of every rule.
func ruleQueries(file string) ([]string, error) {
	content, err := ruleGroups(file)
	if err != nil {
		return nil, err
	}
	var rf struct {
		Groups []struct {
			Rules []struct {
				Expr string `json:"expr"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(content, &rf); err != nil {
		return nil, err
	}
	var out []string
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			out = append(out, r.Expr)
		}
	}
	return out, nil
}
