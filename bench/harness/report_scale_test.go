package harness

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestWriteScale(t *testing.T) {
	res := func(name string, ready time.Duration, warm, end int64, writes float64) *scaleResult {
		return &scaleResult{controller: name, ready: ready, cpu: 10 * time.Second, rss: end, anon: end / 2,
			warm: usage{rss: warm}, requests: counts{"APPLY deployments": writes, "GET mykinds": 7},
			restart: restartResult{firstReconcile: 2 * time.Second, lastReconcile: 20 * time.Second, reconciles: 1001,
				requests: counts{"LIST mykinds": 2, "PATCH mykinds/status": 1}, watchLists: counts{"deployments": 1}}}
	}
	r := &Report{cfg: Config{N: 1000, Scale: true}, Scale: []*scaleResult{
		res(Engine, 30*time.Second, 60<<20, 160<<20, 3000),
		res(Reference, 20*time.Second, 40<<20, 90<<20, 2000),
	}}
	var b strings.Builder
	r.Write(&b)
	out := b.String()
	for _, line := range []string{
		"## scale: engine vs reference, N=1000 MyKinds with replicas 0, default flags\n",
		"| time until every parent Ready s (first create -> last Ready)  | 30.0   | 20.0      | 1.50x      |\n",
		"| peak RSS growth per parent KiB, (settled - after warm-up) / N | 102.4  | 51.2      | 2.00x      |\n",
		"| writes per parent, creates to settled                         | 3.00   | 2.00      | 1.50x      |\n",
		"| restart: LIST requests on mykinds (pages)                     | 2      | 2         | 1.00x      |\n",
		"| restart: initial lists streamed by watch, mykinds             | 0      | 0         | -          |\n",
		"- engine restart requests (watches excluded): LIST mykinds 2, PATCH mykinds/status 1.\n",
	} {
		assert.Contains(t, out, line)
	}
}
