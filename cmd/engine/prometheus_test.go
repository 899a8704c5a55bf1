package main

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/internal/localcluster"
	"github.com/cuengine/engine/internal/promserver"
	"github.com/cuengine/engine/rollout/analysis"
	"github.com/cuengine/engine/templates/policy"
)

// TestRolloutPrometheusFlags: --prometheus-url and --prometheus-secret
// give the rollouts a client of a real Prometheus that requires a user
// and password, read from a Secret; a Secret without them, or a secret
// without a url, is refused before the engine starts, and the password
// is in no error.
func TestRolloutPrometheusFlags(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a control plane and Prometheus (run without -short)")
	}
	ctx := context.Background()
	const user, password = "engine", "pr0m-s3cr3t"
	prom, err := promserver.Start(ctx, promserver.Options{Username: user, Password: password})
	require.NoError(t, err)
	defer func() { assert.NoError(t, prom.Stop()) }()
	cluster, err := localcluster.Start(ctx, localcluster.Options{Progress: os.Stderr})
	require.NoError(t, err, "starting the control plane (run `make assets` first)")
	defer func() { assert.NoError(t, cluster.Stop()) }()
	c, err := client.New(cluster.Config, client.Options{Scheme: newScheme()})
	require.NoError(t, err)
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "monitoring"}}))
	for name, data := range map[string]map[string][]byte{
		"prom":  {"username": []byte(user), "password": []byte(password)},
		"empty": {"note": []byte(password)},
	} {
		require.NoError(t, c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "monitoring", Name: name}, Data: data}))
	}

	o := prometheusOptions{url: prom.URL, secret: "monitoring/prom", timeout: 5 * time.Second}
	a, err := o.analyzer(ctx, cluster.Config)
	require.NoError(t, err)
	one := policy.AnalysisCheck{Name: "one", Query: "vector(1)", Condition: policy.Condition{Op: "==", Bound: 1}}
	res := a.Evaluate(ctx, one, analysis.Vars{})
	assert.Equal(t, analysis.Passed, res.Verdict, res.Message)

	o.secret = "monitoring/empty"
	_, err = o.analyzer(ctx, cluster.Config)
	require.EqualError(t, err, "--prometheus-secret: Secret monitoring/empty has neither a token nor a username and a password")
	o.secret = "prom"
	_, err = o.analyzer(ctx, cluster.Config)
	require.EqualError(t, err, `--prometheus-secret "prom": write NAMESPACE/NAME`)
	o.secret = "monitoring/missing"
	_, err = o.analyzer(ctx, cluster.Config)
	require.ErrorContains(t, err, "--prometheus-secret: reading Secret monitoring/missing: ")
	assert.NotContains(t, err.Error(), password)

	// Without credentials the server refuses: the check is held.
	o.secret = ""
	a, err = o.analyzer(ctx, cluster.Config)
	require.NoError(t, err)
	res = a.Evaluate(ctx, one, analysis.Vars{})
	assert.Equal(t, analysis.Held, res.Verdict, res.Message)

	a, err = (&prometheusOptions{secret: "monitoring/prom"}).analyzer(ctx, cluster.Config)
	require.EqualError(t, err, "--prometheus-secret needs --prometheus-url")
	assert.Nil(t, a)
	a, err = (&prometheusOptions{}).analyzer(ctx, cluster.Config)
	require.NoError(t, err)
	assert.Nil(t, a, "no Prometheus: no analyzer")
}
