package harness

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseShards(t *testing.T) {
	got, err := ParseShards("1, 3")
	require.NoError(t, err)
	assert.Equal(t, []int{1, 3}, got)
	for in, want := range map[string]string{
		"":    `replica counts "": "" is not a number`,
		"1,x": `replica counts "1,x": "x" is not a number`,
		"0":   "replica count 0: want 1 to 16",
		"17":  "replica count 17: want 1 to 16",
		"3,3": "replica count 3 given twice",
	} {
		_, err := ParseShards(in)
		assert.EqualError(t, err, want, in)
	}
}

func TestShardedRuns(t *testing.T) {
	runs := shardedRuns([]int{1, 3})
	assert.Equal(t, []string{Engine, "sharded-1", "sharded-3"}, runs)
	n, ok := shardCount(runs[2])
	assert.True(t, ok)
	assert.Equal(t, 3, n)
	assert.False(t, isSharded(Engine))
	assert.False(t, isSharded("sharded-x"))
}

func TestFitLine(t *testing.T) {
	base, slope, ok := fitLine([]float64{300, 100, 100, 100}, []float64{200, 120, 120, 120})
	require.True(t, ok)
	assert.InDelta(t, 80, base, 1e-9)
	assert.InDelta(t, 0.4, slope, 1e-9)
	_, _, ok = fitLine([]float64{100, 100}, []float64{1, 2})
	assert.False(t, ok, "one value of x")
	_, _, ok = fitLine([]float64{100}, []float64{1})
	assert.False(t, ok, "one point")
}

// shardedRun is a finished run of the sharding benchmark, for the report.
func shardedRun(name string, create, status time.Duration, replicas ...replicaResult) *runResult {
	res := &runResult{controller: name, round: 1,
		phases:   map[string]time.Duration{phaseCreate: create, phaseStatus: status, phaseRecreate: time.Second, phaseScale: time.Second},
		parents:  map[string]int{phaseCreate: 300, phaseStatus: 300, phaseRecreate: 30, phaseScale: 30},
		requests: map[string]counts{phaseCreate: {"APPLY deployments": 300, "PATCH mykinds": 300}},
		replicas: replicas}
	for _, rep := range replicas {
		res.use = append(res.use, rep.usage)
	}
	t := total(res.use)
	res.cpu, res.rss = t.cpu, t.rss
	return res
}

func TestShardingReport(t *testing.T) {
	rep := &Report{cfg: Config{N: 300, Workers: 4, Clients: 16, Rounds: 1, Shards: []int{1, 3}, Controllers: shardedRuns([]int{1, 3})},
		LoadStart: "1.0 1.0 1.0", LoadEnd: "2.0 2.0 2.0", Raw: []time.Duration{time.Second}}
	plain := shardedRun(Engine, 4*time.Second, 2*time.Second)
	plain.use = []usage{{cpu: 5 * time.Second, rss: 190 * mib}}
	plain.cpu, plain.rss = 5*time.Second, 190*mib
	plain.requests = map[string]counts{phaseCreate: {"APPLY deployments": 300}, phaseStatus: {"LIST mykinds": 2}}
	rep.Runs = []*runResult{plain,
		shardedRun("sharded-1", 6*time.Second, 2*time.Second,
			replicaResult{shard: "engine-0", sharder: true, parents: 300, usage: usage{cpu: 6 * time.Second, rss: 200 * mib}}),
		shardedRun("sharded-3", 3*time.Second, 2*time.Second,
			replicaResult{shard: "engine-0", parents: 100, usage: usage{cpu: 2 * time.Second, rss: 120 * mib}},
			replicaResult{shard: "engine-1", sharder: true, parents: 100, usage: usage{cpu: 3 * time.Second, rss: 120 * mib}},
			replicaResult{shard: "engine-2", parents: 100, usage: usage{cpu: 2 * time.Second, rss: 120 * mib}}),
	}
	var out bytes.Buffer
	rep.Write(&out)
	text := out.String()
	for _, want := range []string{
		"## Sharding: N=300 MyKinds over 1 and 3 replica(s), 4 reconcile workers per replica, 16 harness clients, 1 round(s)\n",
		"| metric                                     | engine, no sharding | 1 replica, sharded | 3 replicas |\n",
		"| (a)+(b) create and converge, s             | 6.00                | 8.00               | 5.00       |\n",
		"| parents per replica, mean                  | 300                 | 300                | 100        |\n",
		"| peak RSS MiB per replica, mean             | 190                 | 200                | 120        |\n",
		"| peak RSS MiB, sum over replicas            | 190                 | 200                | 360        |\n",
		"| CPU s, all replicas, start to end of (d)   | 5.0                 | 6.0                | 7.0        |\n",
		"| writes per parent, (a)-(d)                 | 1.00                | 2.00               | 2.00       |\n",
		"| engine, no sharding | 1     | -        | -       | 300     | 190          | 5.0   |\n",
		"| 3 replicas          | 1     | engine-1 | yes     | 100     | 120          | 3.0   |\n",
		"- Growth from 1 replica, sharded to 3 replicas: peak RSS per replica 0.60x (mean), 0.60x (largest); RSS summed 1.80x; CPU summed 1.17x; (a) 0.50x, (b) 1.00x.\n",
		"- Peak RSS against parents held, least squares over the 4 replicas of the sharded runs: 80 MiB + 409.6 KiB per parent; 1 GiB holds about 2360 parents per replica",
		"| APPLY deployments | 300                 | 300                | 300        |\n",
		"| PATCH mykinds     | .                   | 300                | 300        |\n",
		"| LIST mykinds      | 2                   | .                  | .          |\n",
		"- Raw limit for (a), the harness creating the N Deployments itself: 1.00s.\n",
	} {
		assert.Contains(t, text, want)
	}
}

func TestGroup(t *testing.T) {
	dir := t.TempDir()
	sleep, err := exec.LookPath("sleep")
	require.NoError(t, err)
	var g group
	for i := range 2 {
		p, err := startProcess(sleep, []string{"60"}, nil, filepath.Join(dir, strings.Repeat("x", i+1)+".log"), nil)
		require.NoError(t, err)
		g = append(g, p)
	}
	require.NoError(t, g.alive())
	use, err := g.usage()
	require.NoError(t, err)
	require.Len(t, use, 2)
	assert.Positive(t, use[0].rss)
	assert.Equal(t, use[0].rss+use[1].rss, total(use).rss)

	require.NoError(t, g[1].cmd.Process.Kill())
	<-g[1].exited
	assert.ErrorContains(t, g.alive(), "controller "+sleep+" exited (signal: killed)")
	require.NoError(t, g.stop())
	<-g[0].exited
}
