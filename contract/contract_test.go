package contract_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/cuengine/engine/contract"
)

var myKind = schema.GroupVersionKind{Group: "webapp.my.domain", Version: "v1", Kind: "MyKind"}

// The values are stored in clusters: a change here strands the objects
// that carry the old ones.
func TestWireValues(t *testing.T) {
	for _, kv := range [][2]string{
		{contract.LabelManagedBy, "app.kubernetes.io/managed-by"},
		{contract.ManagedByValue, "engine"},
		{contract.LabelParentUID, "engine.cuengine.dev/parent-uid"},
		{contract.LabelChild, "engine.cuengine.dev/child"},
		{contract.AnnotationParent, "engine.cuengine.dev/parent"},
		{contract.AnnotationAppliedHash, "engine.cuengine.dev/applied-hash"},
		{contract.AnnotationDependsOn, "engine.cuengine.dev/depends-on"},
		{contract.AnnotationOwnership, "engine.cuengine.dev/ownership"},
		{contract.AnnotationConnectionSecretOf, "engine.cuengine.dev/connection-secret-of"},
		{contract.AnnotationConnectionSecretSums, "engine.cuengine.dev/connection-secret-sums"},
		{contract.Finalizer, "engine.cuengine.dev/finalizer"},
		{contract.AnnotationResourcePrefix, "resources.engine.cuengine.dev/"},
		{contract.AnnotationInventory, "engine.cuengine.dev/inventory"},
		{contract.AnnotationInventoryProofs, "engine.cuengine.dev/inventory-proofs"},
		{contract.AnnotationCreateToken, "engine.cuengine.dev/create-token"},
		{contract.AnnotationAdoptBy, "engine.cuengine.dev/adopt-by"},
		{contract.AnnotationDeletionPolicy, "engine.cuengine.dev/deletion-policy"},
		{contract.AnnotationTemplateRevision, "engine.cuengine.dev/template-revision"},
		{contract.AnnotationEvaluationOverran, "engine.cuengine.dev/evaluation-overran"},
		{contract.AnnotationRolloutTo, "engine.cuengine.dev/rollout-to"},
		{contract.AnnotationPaused, "engine.cuengine.dev/paused"},
		{contract.AnnotationReconcileRequestedAt, "engine.cuengine.dev/reconcile-requested-at"},
		{contract.LabelCanary, "engine.cuengine.dev/canary"},
		{contract.LabelShard, "engine.cuengine.dev/shard"},
		{contract.LabelDrain, "engine.cuengine.dev/drain"},
		{contract.LabelShardGroup, "engine.cuengine.dev/shard-group"},
		{contract.LabelCluster, "engine.cuengine.dev/cluster"},
		{contract.KeyKubeconfig, "kubeconfig"},
		{contract.AnnotationCRDTemplate, "engine.cuengine.dev/template"},
		{contract.AnnotationCRDTemplateHash, "engine.cuengine.dev/template-revision"},
		{contract.LabelTemplateKind, "engine.cuengine.dev/template-kind"},
		{contract.AnnotationTemplateKind, "engine.cuengine.dev/template-kind"},
		{contract.AnnotationTemplatePath, "engine.cuengine.dev/template-path"},
		{contract.AnnotationTemplateHash, "engine.cuengine.dev/template-hash"},
		{contract.AnnotationRolloutPhase, "engine.cuengine.dev/rollout-phase"},
		{contract.AnnotationRolloutWave, "engine.cuengine.dev/rollout-wave"},
		{contract.AnnotationRolloutMessage, "engine.cuengine.dev/rollout-message"},
		{contract.AnnotationRolloutHeldDeletes, "engine.cuengine.dev/rollout-held-deletes"},
		{contract.AnnotationRolloutFailingBefore, "engine.cuengine.dev/rollout-failing-before"},
		{contract.AnnotationRolloutSoakSince, "engine.cuengine.dev/rollout-soak-since"},
		{contract.AnnotationRolloutAnalysis, "engine.cuengine.dev/rollout-analysis"},
		{contract.AnnotationRolloutPaused, "engine.cuengine.dev/rollout-paused"},
		{contract.AnnotationRolloutApproved, "engine.cuengine.dev/rollout-approved"},
		{contract.AnnotationRolloutUndo, "engine.cuengine.dev/rollout-undo"},
	} {
		assert.Equal(t, kv[1], kv[0])
	}
	assert.Equal(t, "template 5f2a, generation 3", contract.EvaluationOverranValue("5f2a", 3))
	assert.Equal(t, "engine", contract.FieldManager)
	assert.Equal(t, []string{"conditions", "observedGeneration", "resources", "templateRevision", "lastHandledReconcileAt"}, contract.EngineStatusFields())
}

func TestKindString(t *testing.T) {
	for _, tc := range []struct {
		gvk  schema.GroupVersionKind
		want string
	}{
		{myKind, "MyKind.webapp.my.domain/v1"},
		{schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, "Deployment.apps/v1"},
		{schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, "ConfigMap.v1"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			assert.Equal(t, tc.want, contract.KindString(tc.gvk))
			got, ok := contract.ParseKindString(tc.want)
			assert.True(t, ok)
			assert.Equal(t, tc.gvk, got, "read back")
		})
	}
}

func TestParseKindStringRefuses(t *testing.T) {
	for _, s := range []string{"", "MyKind", "MyKind/v1", ".webapp.my.domain/v1", "MyKind.webapp.my.domain/", "MyKind.webapp.my.domain/v1/x", ".v1", "MyKind."} {
		t.Run(s, func(t *testing.T) {
			got, ok := contract.ParseKindString(s)
			assert.False(t, ok)
			assert.Zero(t, got)
		})
	}
}

func TestTemplateKindLabel(t *testing.T) {
	for _, tc := range []struct {
		gk   schema.GroupKind
		want string
	}{
		{myKind.GroupKind(), "mykind.webapp.my.domain"},
		{schema.GroupKind{Group: "x.example.com", Kind: "K"}, "k.x.example.com"},
		// Over 63 characters: cut and digested. The value is the one the
		// engine has always written; the revisions in clusters carry it.
		{schema.GroupKind{Group: "a-very-long-group-name.for-testing.example.com", Kind: "AnExtremelyLongKindName"}, "anextremelylongkindname.a-very-long-group-name.for-193440609b85"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			got := contract.TemplateKindLabel(tc.gk)
			assert.Equal(t, tc.want, got)
			assert.Empty(t, validation.IsValidLabelValue(got), "a label value")
		})
	}
}

func TestObjectRef(t *testing.T) {
	for _, tc := range []struct {
		gk              schema.GroupKind
		namespace, name string
		want            string
	}{
		{myKind.GroupKind(), "default", "web1", "MyKind.webapp.my.domain/default/web1"},
		{schema.GroupKind{Kind: "ConfigMap"}, "other", "cfg", "ConfigMap/other/cfg"},
		{schema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}, "", "reader", "ClusterRole.rbac.authorization.k8s.io//reader"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			assert.Equal(t, tc.want, contract.ObjectRef(tc.gk, tc.namespace, tc.name))
		})
	}
	parent := &unstructured.Unstructured{}
	parent.SetGroupVersionKind(myKind)
	parent.SetNamespace("default")
	parent.SetName("web1")
	assert.Equal(t, "MyKind.webapp.my.domain/default/web1", contract.ParentRef(parent))
}

func object(status map[string]any, annotations map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(myKind)
	u.SetName("web1")
	u.SetGeneration(3)
	u.SetAnnotations(annotations)
	if status != nil {
		u.Object["status"] = status
	}
	return u
}

func TestParentRevision(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status map[string]any
		number int64
		hash   string
	}{
		{"none", nil, 0, ""},
		{"written", map[string]any{contract.StatusTemplateRevision: contract.TemplateRevisionStatus(4, "abc123")}, 4, "abc123"},
		{"not a map", map[string]any{contract.StatusTemplateRevision: "4"}, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// As stored: through JSON, numbers are int64.
			u := object(tc.status, nil)
			u = &unstructured.Unstructured{Object: jsonRoundTrip(t, u.Object)}
			number, hash := contract.ParentRevision(u)
			assert.Equal(t, tc.number, number)
			assert.Equal(t, tc.hash, hash)
		})
	}
}

func jsonRoundTrip(t *testing.T, obj map[string]any) map[string]any {
	t.Helper()
	b, err := (&unstructured.Unstructured{Object: obj}).MarshalJSON()
	assert.NoError(t, err)
	u := &unstructured.Unstructured{}
	assert.NoError(t, u.UnmarshalJSON(b))
	return u.Object
}

func TestPinnedRevision(t *testing.T) {
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		want        int64
		wantErr     string
	}{
		{"not pinned", nil, 0, ""},
		{"pinned", map[string]string{contract.AnnotationTemplateRevision: "7"}, 7, ""},
		{"spaces", map[string]string{contract.AnnotationTemplateRevision: " 7 "}, 7, ""},
		{"not a number", map[string]string{contract.AnnotationTemplateRevision: "latest"}, 0, `annotation engine.cuengine.dev/template-revision="latest" is not a revision number`},
		{"zero", map[string]string{contract.AnnotationTemplateRevision: "0"}, 0, `annotation engine.cuengine.dev/template-revision="0" is not a revision number`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := contract.PinnedRevision(object(nil, tc.annotations))
			if tc.wantErr != "" {
				assert.EqualError(t, err, tc.wantErr)
			} else {
				assert.NoError(t, err)
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestConditions(t *testing.T) {
	status := map[string]any{
		contract.StatusObservedGeneration: int64(3),
		contract.StatusConditions: []any{
			map[string]any{"type": contract.ConditionReady, "status": "False", "reason": contract.ReasonWaiting, "message": "m", "lastTransitionTime": "2026-01-01T00:00:00Z"},
			"not a condition",
			map[string]any{"type": contract.ConditionSynced, "status": "True", "reason": contract.ReasonSynced, "lastTransitionTime": "2026-01-01T00:00:00Z"},
		},
	}
	assert.Len(t, contract.ConditionsOf(status), 2, "the entry that is not a condition is dropped")
	u := object(status, nil)
	ready := contract.FindCondition(u, contract.ConditionReady)
	if assert.NotNil(t, ready) {
		assert.Equal(t, metav1.ConditionFalse, ready.Status)
		assert.Equal(t, contract.ReasonWaiting, ready.Reason)
	}
	assert.Nil(t, contract.FindCondition(u, "Other"))
	assert.True(t, contract.ConditionIs(u, contract.ConditionSynced, metav1.ConditionTrue))
	assert.False(t, contract.ConditionIs(u, contract.ConditionReady, metav1.ConditionTrue))
	assert.False(t, contract.ConditionIs(u, "Other", metav1.ConditionTrue))
	assert.Nil(t, contract.FindCondition(object(nil, nil), contract.ConditionReady), "no status")
}

func TestGenerationObserved(t *testing.T) {
	assert.True(t, contract.GenerationObserved(object(map[string]any{contract.StatusObservedGeneration: int64(3)}, nil)))
	assert.False(t, contract.GenerationObserved(object(map[string]any{contract.StatusObservedGeneration: int64(2)}, nil)), "an older generation")
	assert.False(t, contract.GenerationObserved(object(nil, nil)), "no status")
}
