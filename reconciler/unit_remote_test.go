package reconciler

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/render"
	"github.com/cuengine/engine/templates"
)

func remoteObj(apiVersion, kind, ns, name, local string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind}}
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetLabels(map[string]string{contract.LabelChild: local})
	return u
}

// TestRemoteInventory: the next inventory names every child the template
// puts in a cluster and every one there not pruned yet; a cluster that
// cannot be read keeps its entries as they are, so a cluster down or
// removed never makes the engine forget what it put there.
func TestRemoteInventory(t *testing.T) {
	parent := &unstructured.Unstructured{}
	parent.SetUID("p-1")
	app := remoteObj("apps/v1", "Deployment", "acme", "app", "app")
	app.SetUID("app-1")
	old := remoteObj("v1", "ConfigMap", "acme", "old", "old")
	old.SetUID("old-1")
	ns := remoteObj("v1", "Namespace", "", "acme", "ns")
	rc := &remoteChildren{
		inv: render.Inventory{
			"west:Deployment.apps/acme/app": true, "west:ConfigMap/acme/gone": true, "west:ConfigMap/acme/old": true,
			"east:Namespace//acme": true, "east:Deployment.apps/acme/app": true,
			"north:Namespace//x":      true,
			"ConfigMap/default/local": true,
		},
		proofs: render.Proofs{"east:Namespace//acme": "uid:ns-9", "west:ConfigMap/acme/gone": "uid:gone-1", "west:Deployment.apps/acme/app": "token:x"},
		clusters: map[string]*remoteCluster{
			"west":  {name: "west", live: []*unstructured.Unstructured{app, old}, desired: []*unstructured.Unstructured{app}},
			"east":  {name: "east", err: &ClusterError{Cluster: "east", Err: errors.New("down")}},
			"south": {name: "south", desired: []*unstructured.Unstructured{ns}},
		},
	}
	inv, proofs := rc.inventory(parent)
	assert.Equal(t, render.Inventory{
		"west:Deployment.apps/acme/app": true, "west:ConfigMap/acme/old": true, // live, the second not pruned yet
		"east:Namespace//acme": true, "east:Deployment.apps/acme/app": true, // down: kept as they are
		"north:Namespace//x":    true, // not read at all: kept
		"south:Namespace//acme": true, // recorded before it is created
	}, inv)
	assert.Equal(t, render.Proofs{
		"west:Deployment.apps/acme/app": "uid:app-1",                                     // seen: its create's token replaced by its UID; old has none, as an older engine left it
		"east:Namespace//acme":          "uid:ns-9",                                      // down: kept; its Deployment had none, and gets none
		"south:Namespace//acme":         render.Pending(parent, "south:Namespace//acme"), // the token it will be created with
	}, proofs)
}

// TestRemoteReport: a cluster that does not answer is a transient
// ClusterUnreachable (backoff); one not registered waits for its
// registration, ClusterUnknown; each says how many children it leaves.
func TestRemoteReport(t *testing.T) {
	rc := &remoteChildren{
		inv: render.Inventory{"east:Namespace//acme": true, "east:Deployment.apps/acme/app": true, "gone:Namespace//x": true},
		clusters: map[string]*remoteCluster{
			"east": {name: "east", err: &ClusterError{Cluster: "east", Err: errors.New(`cluster "east" is unreachable: connection refused`)}},
			"gone": {name: "gone", err: &ClusterError{Cluster: "gone", Unknown: true, Err: errors.New(`cluster "gone" was removed`)}},
			"west": {name: "west"},
		},
	}
	st := newStatus()
	rc.report(st, "")
	if assert.Len(t, st.problems, 2) {
		assert.Equal(t, contract.ReasonClusterUnreachable, st.problems[0].reason)
		assert.Equal(t, `cluster "east" is unreachable: connection refused; the parent's 2 children there are left as they are`, st.problems[0].message)
		assert.Equal(t, transient, st.problems[0].class)
		assert.Equal(t, contract.ReasonClusterUnknown, st.problems[1].reason)
		assert.Equal(t, `cluster "gone" was removed; the parent's 1 child there is left as it is`, st.problems[1].message)
		assert.Equal(t, waiting, st.problems[1].class)
	}
	assert.False(t, st.problems[0].stalls, "a cluster down is no reason to call a human")
}

// TestReadyNamesClusters: a parent whose children are all ready says in
// its Ready message which are in which workload cluster, Namespaces first,
// one clause per cluster; one with local children only says what it said
// before.
func TestReadyNamesClusters(t *testing.T) {
	inCluster := func(u *unstructured.Unstructured, cluster string) *unstructured.Unstructured {
		u.SetAnnotations(map[string]string{contract.AnnotationCluster: cluster})
		return u
	}
	local := remoteObj("v1", "ConfigMap", "default", "note", "note")
	children := []*unstructured.Unstructured{
		local,
		inCluster(remoteObj("v1", "ConfigMap", "acme", "settings", "settings"), "west"),
		inCluster(remoteObj("v1", "Namespace", "", "acme", "ns"), "west"),
		inCluster(remoteObj("v1", "ConfigMap", "acme", "copy", "copy"), "east"),
	}
	ready := func(children []*unstructured.Unstructured) condition {
		st := newStatus()
		st.setReady(&evaluation{result: &templates.Result{}, children: children}, render.NewLiveChildren(children))
		return st.ready
	}
	c := ready(children)
	assert.Equal(t, contract.ReasonReady, c.reason)
	assert.Equal(t, "all children are ready; in cluster east: ConfigMap copy; in cluster west: Namespace acme, ConfigMap settings", c.message)
	assert.Equal(t, "all children are ready", ready([]*unstructured.Unstructured{local}).message, "local children only: as before")

	// Not ready: the message names the one it waits for, and its cluster.
	st := newStatus()
	st.setReady(&evaluation{result: &templates.Result{}, children: children}, render.NewLiveChildren(children[:2]))
	assert.Equal(t, "waiting for Namespace acme in cluster west, ConfigMap copy in cluster east", st.ready.message)
}

// TestRemoteAnswerIsNotUnreachable: a workload cluster that answers a
// request with an error (the Namespace a Deployment goes in was refused,
// so it is not found; the engine's role there lacks a right) is said as
// it answered, classed as a local child's error would be, not as a
// cluster that does not answer; one that does not answer still is.
func TestRemoteAnswerIsNotUnreachable(t *testing.T) {
	notFound := &remoteCluster{name: "west"}
	notFound.fail(context.Background(), fmt.Errorf("applying Deployment app in cluster west: %w", apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "acme")))
	forbidden := &remoteCluster{name: "east"}
	forbidden.fail(context.Background(), fmt.Errorf("listing Deployment children: %w", apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "", errors.New("no rule"))))
	down := &remoteCluster{name: "north"}
	down.fail(context.Background(), errors.New("dial tcp 127.0.0.1:1: connect: connection refused"))
	// A proxy's error page, as client-go reports a body that is not a
	// Status: the status line said, the page not copied.
	paged := &remoteCluster{name: "south"}
	paged.fail(context.Background(), fmt.Errorf("listing Deployment children: %w", apierrors.NewGenericServerResponse(500, "GET", schema.GroupResource{Group: "apps", Resource: "deployments"}, "", "<html>token=s3cr3t</html>", 0, true)))
	rc := &remoteChildren{
		inv:      render.Inventory{"west:Deployment.apps/acme/app": true},
		clusters: map[string]*remoteCluster{"west": notFound, "east": forbidden, "north": down, "south": paged},
	}
	st := newStatus()
	rc.report(st, "")
	require.Len(t, st.problems, 4)
	byCluster := map[string]problem{}
	for _, p := range st.problems {
		for _, name := range []string{"west", "east", "north", "south"} {
			if strings.Contains(p.message, `"`+name+`"`) {
				byCluster[name] = p
			}
		}
	}
	assert.Equal(t, contract.ReasonNotSynced, byCluster["west"].reason)
	assert.Equal(t, transient, byCluster["west"].class)
	assert.Equal(t, `in cluster "west": applying Deployment app in cluster west: namespaces "acme" not found; the parent's 1 child there is left as it is`, byCluster["west"].message)
	assert.Equal(t, contract.ReasonApplyFailed, byCluster["east"].reason)
	assert.Equal(t, terminal, byCluster["east"].class)
	assert.Contains(t, byCluster["east"].message, `in cluster "east": listing Deployment children: deployments.apps is forbidden`)
	assert.Equal(t, contract.ReasonClusterUnreachable, byCluster["north"].reason)
	assert.Contains(t, byCluster["north"].message, `cluster "north" is unreachable: dial tcp`)
	assert.Equal(t, contract.ReasonNotSynced, byCluster["south"].reason, "a 500 is retried")
	assert.Equal(t, `in cluster "south": listing Deployment children: the server answered 500 Internal Server Error with a body that is not a Kubernetes Status (25 bytes, not shown; the engine logs it at debug level); the parent's 0 children there are left as they are`, byCluster["south"].message)
}
