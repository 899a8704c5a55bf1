package reconciler

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/contract"
)

// droppingStatusClient plays an apiserver whose CRD does not declare one
// status field: a status write drops it, with the warning the apiserver
// returns, handed to the request's warning handler.
type droppingStatusClient struct {
	client.Client
	field string
}

func (c droppingStatusClient) Status() client.SubResourceWriter {
	return droppingStatus{SubResourceWriter: c.Client.Status(), field: c.field}
}

type droppingStatus struct {
	client.SubResourceWriter
	field string
}

func (s droppingStatus) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	data, err := patch.Data(obj)
	if err != nil {
		return err
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return err
	}
	if st, ok := m["status"].(map[string]any); ok {
		if _, set := st[s.field]; set {
			delete(st, s.field)
			warningHandler{}.HandleWarningHeaderWithContext(ctx, 299, "", fmt.Sprintf("unknown field %q", "status."+s.field))
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return s.SubResourceWriter.Patch(ctx, obj, client.RawPatch(patch.Type(), b), opts...)
}

// TestStatusFieldsDropped: a status field the apiserver drops on the
// status write (the installed CRD does not declare it, and the apiserver
// says so in a warning) is a Warning event and Synced's message, not a log
// line, and the status settles without it instead of being written again
// on every reconcile.
func TestStatusFieldsDropped(t *testing.T) {
	mk := unitParent(unitMyKind, "mk", map[string]any{"deploymentName": "web"})
	e := newUnitEnv(t, unitMyKind, mk)
	e.r.status.writer = droppingStatusClient{Client: e.r.status.writer, field: "readyReplicas"}
	e.reconcileClean(mk) // applies the Deployment
	e.takeWrites()
	e.events.take()
	e.reconcileClean(mk) // writes the status

	msg := "the apiserver dropped status fields the template renders (status.readyReplicas): the CRD of MyKind.webapp.my.domain/v1 " +
		"does not declare them; install the CRD the template generates (engine crds)"
	assert.Equal(t, cond{metav1.ConditionFalse, contract.ReasonStatusFieldsDropped, msg}, condOf(e.condition(mk, contract.ConditionSynced)))
	assert.Equal(t, []unitEvent{{Type: "Warning", Reason: contract.ReasonStatusFieldsDropped, Message: msg}}, e.events.take())
	_, found, err := unstructured.NestedFieldNoCopy(e.reread(mk).Object, "status", "readyReplicas")
	require.NoError(t, err)
	assert.False(t, found, "dropped")
	assert.Equal(t, map[string]int{"status MyKind": 2}, e.takeWrites(), "stored without it, then again with the condition")

	e.annotate(e.get(deploymentGVK, unitNamespace, "web"), "note", "x") // new inputs, the same status
	e.reconcileClean(mk)
	assert.Empty(t, e.takeWrites(), "settled on the status as the apiserver stores it")
	assert.Empty(t, e.events.take(), "one event")
	assert.Equal(t, cond{metav1.ConditionFalse, contract.ReasonStatusFieldsDropped, msg}, condOf(e.condition(mk, contract.ConditionSynced)))
}
