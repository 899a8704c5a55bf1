package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const offlineTemplates = "testdata/offline"

// TestRenderObservedChain: a Service that waits for the Deployment and an
// Ingress that waits for the Service, all three given as observed, are all
// rendered, and the template says ready, as it does live once the
// reconciles have created them one after the other.
func TestRenderObservedChain(t *testing.T) {
	c := offlineTemplates + "/tests/chain/all-observed/"
	out, errOut, code := run(t, "render", "--templates", offlineTemplates, "-f", c+"parent.yaml", "--observed", c+"observed.yaml")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "# child \"deployment\"\napiVersion: apps/v1\nkind: Deployment\n")
	assert.Contains(t, out, "# child \"ingress\"\napiVersion: networking.k8s.io/v1\nkind: Ingress\n")
	assert.Contains(t, out, "# child \"service\"\napiVersion: v1\nkind: Service\n")
	assert.Contains(t, out, "# parent with the status the template computes (template says ready: true)\n")
}

// TestTestOffline: engine test renders the same chain to a fixed point, and
// a parent.yaml without the uid the template reads fails with a message
// that says where to give one.
func TestTestOffline(t *testing.T) {
	out, errOut, code := run(t, "test", "--templates", offlineTemplates)
	require.Equal(t, 0, code, out+errOut)
	for _, c := range []string{"chain/all-observed", "owner/no-uid", "owner/with-uid"} {
		assert.Contains(t, out, "--- PASS: "+c+" (")
	}
}

// TestRenderMissingUID: a parent without the uid its template reads names
// the field and the two ways to give it; --uid gives it; a uid in -f and
// another in --uid are refused.
func TestRenderMissingUID(t *testing.T) {
	noUID := offlineTemplates + "/tests/owner/no-uid/parent.yaml"
	_, errOut, code := run(t, "render", "--templates", offlineTemplates, "-f", noUID)
	assert.Equal(t, 1, code)
	assert.Equal(t, "Owner shop: the parent has no metadata.uid; give one in -f or --uid\n"+
		"the template fails without it: owner.cue:17:15: children.config.data.owner: error in call to strings.Join (see owner.cue:17:67)\n", errOut)

	out, errOut, code := run(t, "render", "--templates", offlineTemplates, "-f", noUID, "--uid", "6d1f0c2e-1b7a-4a51-9f0e-2b8c3d4e5f60")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "owner: shop/6d1f0c2e-1b7a-4a51-9f0e-2b8c3d4e5f60\n")
	assert.Contains(t, out, "  uid: 6d1f0c2e-1b7a-4a51-9f0e-2b8c3d4e5f60\n", "the parent is printed with its uid")

	withUID := offlineTemplates + "/tests/owner/with-uid/parent.yaml"
	_, errOut, code = run(t, "render", "--templates", offlineTemplates, "-f", withUID, "--uid", "0f1e2d3c-0000-4000-8000-000000000000")
	assert.Equal(t, 1, code)
	assert.Equal(t, "Owner shop: metadata.uid is 6d1f0c2e-1b7a-4a51-9f0e-2b8c3d4e5f60 in -f and 0f1e2d3c-0000-4000-8000-000000000000 in --uid; give one\n", errOut)
}
