package main

import (
	"encoding/xml"
	"fmt"
	"os"
	"strings"
	"time"
)

// The JUnit XML report of engine test --junit: one testsuite per template,
// one testcase per case, as CI systems (GitLab, Jenkins, GitHub actions
// reporters) read it.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Time     string      `xml:"time,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }

// writeJUnit writes the results as a JUnit XML report.
func writeJUnit(path string, results []caseResult, elapsed time.Duration) error {
	report := junitSuites{Tests: len(results), Time: seconds(elapsed)}
	index := map[string]int{}
	for _, r := range results {
		i, ok := index[r.template]
		if !ok {
			i = len(report.Suites)
			index[r.template] = i
			report.Suites = append(report.Suites, junitSuite{Name: r.template})
		}
		s := &report.Suites[i]
		jc := junitCase{Name: r.name, Classname: r.template, Time: seconds(r.elapsed), SystemOut: strings.Join(r.logs, "\n")}
		if r.failure != "" {
			msg, _, _ := strings.Cut(r.failure, "\n")
			jc.Failure = &junitFailure{Message: msg, Text: r.failure}
			s.Failures++
			report.Failures++
		}
		s.Tests++
		s.Cases = append(s.Cases, jc)
	}
	for i := range report.Suites {
		var d time.Duration
		for _, r := range results {
			if r.template == report.Suites[i].Name {
				d += r.elapsed
			}
		}
		report.Suites[i].Time = seconds(d)
	}
	b, err := xml.MarshalIndent(report, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append([]byte(xml.Header), append(b, '\n')...), 0o644)
}
