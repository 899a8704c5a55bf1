package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestHighAvailability runs two engines with leader election: only the
// leader reconciles; SIGKILL it and the other takes over within the lease
// time, creating nothing twice.
func TestHighAvailability(t *testing.T) {
	emu := startEmulator(t)
	dir := templatesDir(t, "examples/templates/gcs.cue")
	installCRDs(t, dir)
	t.Setenv("STORAGE_EMULATOR_HOST", emu.Host())
	ns := namespace(t)
	const lease = 4 * time.Second
	election := []string{"--leader-elect", "--leader-election-namespace", ns, "--leader-election-id", "engine-ha",
		"--leader-election-lease-duration", lease.String(), "--leader-election-renew-deadline", "3s", "--leader-election-retry-period", "500ms"}

	first := startEngine(t, dir, election...)
	holder := func(ctx context.Context) (string, error) {
		l, err := kube.CoordinationV1().Leases(ns).Get(ctx, "engine-ha", metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return "", err
		}
		return *l.Spec.HolderIdentity, nil
	}
	var leader string
	eventually(t, "the first engine to lead", 30*time.Second, func(ctx context.Context) (bool, error) {
		var err error
		leader, err = holder(ctx)
		return leader != "", err
	})
	second := startEngine(t, dir, election...)

	create := func(name string) {
		kubectlApply(t, ns, fmt.Sprintf("apiVersion: storage.matsumo.dev/v1\nkind: Gcs\nmetadata: {name: %s}\nspec: {projectID: p, bucketName: ha-data}\n", name))
	}
	ready := func(name string) string {
		var physical string
		eventually(t, name+" Ready", 60*time.Second, func(ctx context.Context) (bool, error) {
			u, err := gcsParent(ctx, ns, name)
			if err != nil {
				return false, err
			}
			physical, _, _ = unstructured.NestedString(u.Object, "status", "bucketFullName")
			status, _, err := condition(ctx, gcsKind, ns, name, "Ready")
			return status == "True" && physical != "", err
		})
		return physical
	}
	create("one")
	one := ready("one")
	// The engine's controllers start only on the leader.
	const started = `"msg":"Starting Controller","controller":"engine-gcs`
	assert.Contains(t, first.log.String(), started, "the leader runs the Gcs controller")
	assert.NotContains(t, second.log.String(), started, "the follower does not")

	first.kill()
	killed := time.Now()
	eventually(t, "the second engine to take over", 30*time.Second, func(ctx context.Context) (bool, error) {
		h, err := holder(ctx)
		return h != "" && h != leader, err
	})
	takeover := time.Since(killed)
	t.Logf("takeover after SIGKILL of the leader: %s (lease %s)", takeover.Round(100*time.Millisecond), lease)
	assert.Less(t, takeover, 2*lease+2*time.Second, "within the lease time, give or take a retry")

	create("two")
	two := ready("two")
	all, err := emu.Buckets(context.Background())
	require.NoError(t, err)
	var names []string
	for _, b := range all {
		names = append(names, b.Name)
	}
	assert.ElementsMatch(t, []string{one, two}, names, "one bucket per Gcs, none twice")
	assert.True(t, strings.HasPrefix(one, "ha-data-") && strings.HasPrefix(two, "ha-data-") && one != two)
}
