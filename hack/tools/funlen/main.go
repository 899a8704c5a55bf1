// Command funlen reports the functions longer than 100 lines, with
// github.com/ultraware/funlen: a function's lines run from the line of
// `func` to that of its closing brace, comments and blank lines included
// (funlen counts those between the two, so its limit is two less). It
// counts no statements.
//
// `make lint` runs it with -test=false on every package but bench/'s:
// tests, benchmarks and the bench harness may be longer.
package main

import (
	"github.com/ultraware/funlen"
	"golang.org/x/tools/go/analysis/singlechecker"
)

// maxLines is the most lines a function may have.
const maxLines = 100

func main() {
	// A statement limit below zero turns that check off.
	singlechecker.Main(funlen.NewAnalyzer(maxLines-2, -1, false))
}
