// Command promcheck checks the engine's Prometheus alerts and Grafana
// dashboard with Prometheus's own parsers, without a Prometheus:
//
//	promcheck rules FILE...     the checks of `promtool check rules` (rulefmt's
//	                            parsing and validation, PromQL, templates,
//	                            duplicate rules); FILE is a rule file or a
//	                            PrometheusRule
//	promcheck metrics FILE...   parses every query of the dashboards and rule
//	                            files and prints the metric names they select,
//	                            one per line (e2e/deploy_test.go checks each is
//	                            exported by a running engine)
//
// It is built from its own module (hack/tools/promcheck), so the engine's
// go.mod carries none of Prometheus's dependencies; building promtool itself
// would compile Prometheus's service discovery and storage for two checks.
package main

import (
	"fmt"
	"os"
	"sort"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: promcheck rules|metrics FILE...")
		os.Exit(2)
	}
	files := os.Args[2:]
	switch os.Args[1] {
	case "rules":
		failed := false
		for _, f := range files {
			n, errs := checkRules(f)
			for _, err := range errs {
				fmt.Fprintf(os.Stderr, "%s: %v\n", f, err)
			}
			if len(errs) > 0 {
				failed = true
				continue
			}
			fmt.Printf("%s: %d rules found\n", f, n)
		}
		if failed {
			os.Exit(1)
		}
	case "metrics":
		all := map[string]bool{}
		for _, f := range files {
			names, err := metricsOf(f)
			if err != nil {
				fmt.Fprintf(os.Stderr, "%s: %v\n", f, err)
				os.Exit(1)
			}
			for _, n := range names {
				all[n] = true
			}
		}
		var sorted []string
		for n := range all {
			sorted = append(sorted, n)
		}
		sort.Strings(sorted)
		for _, n := range sorted {
			fmt.Println(n)
		}
	default:
		fmt.Fprintf(os.Stderr, "promcheck: unknown check %q (rules, metrics)\n", os.Args[1])
		os.Exit(2)
	}
}
