package micro_test

import (
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"
)

// parentYAML is a MyKind as the engine reads it from its cache once it has
// been reconciled: server-set metadata, managed fields and the engine's
// status.
const parentYAML = `
apiVersion: webapp.my.domain/v1
kind: MyKind
metadata:
  name: mk-00042
  namespace: bench
  uid: 0a1b2c3d-0000-4000-8000-000000000042
  resourceVersion: "123456"
  generation: 1
  creationTimestamp: "2026-01-01T00:00:00Z"
  managedFields:
  - apiVersion: webapp.my.domain/v1
    fieldsType: FieldsV1
    fieldsV1: {"f:spec": {".": {}, "f:deploymentName": {}, "f:replicas": {}}}
    manager: bench
    operation: Update
    time: "2026-01-01T00:00:00Z"
  - apiVersion: webapp.my.domain/v1
    fieldsType: FieldsV1
    fieldsV1: {"f:status": {".": {}, "f:conditions": {}, "f:observedGeneration": {}, "f:readyReplicas": {}}}
    manager: engine
    operation: Update
    subresource: status
    time: "2026-01-01T00:00:01Z"
spec:
  deploymentName: web-00042
  replicas: 3
status:
  observedGeneration: 1
  readyReplicas: 3
  conditions:
  - {type: Ready, status: "True", reason: Ready, message: "", lastTransitionTime: "2026-01-01T00:00:01Z", observedGeneration: 1}
  - {type: Synced, status: "True", reason: Synced, message: "", lastTransitionTime: "2026-01-01T00:00:01Z", observedGeneration: 1}
`

// deploymentYAML is the parent's Deployment as the engine observes it:
// apiserver defaults, engine labels and annotations, managed fields, status.
const deploymentYAML = `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web-00042
  namespace: bench
  uid: 0a1b2c3d-0000-4000-8000-100000000042
  resourceVersion: "123460"
  generation: 1
  creationTimestamp: "2026-01-01T00:00:00Z"
  labels:
    app.kubernetes.io/managed-by: engine
    engine.cuengine.dev/child: deployment
    engine.cuengine.dev/parent-uid: 0a1b2c3d-0000-4000-8000-000000000042
  annotations:
    engine.cuengine.dev/parent: MyKind.webapp.my.domain/bench/mk-00042
    engine.cuengine.dev/applied-hash: 3f2a1b4c5d6e
  ownerReferences:
  - {apiVersion: webapp.my.domain/v1, kind: MyKind, name: mk-00042, uid: 0a1b2c3d-0000-4000-8000-000000000042, controller: true, blockOwnerDeletion: true}
  managedFields:
  - apiVersion: apps/v1
    fieldsType: FieldsV1
    fieldsV1: {"f:metadata": {"f:labels": {}, "f:annotations": {}, "f:ownerReferences": {}}, "f:spec": {"f:replicas": {}, "f:selector": {}, "f:template": {"f:metadata": {"f:labels": {}}, "f:spec": {"f:containers": {}}}}}
    manager: engine
    operation: Apply
    time: "2026-01-01T00:00:00Z"
  - apiVersion: apps/v1
    fieldsType: FieldsV1
    fieldsV1: {"f:status": {"f:availableReplicas": {}, "f:observedGeneration": {}, "f:readyReplicas": {}, "f:replicas": {}, "f:updatedReplicas": {}}}
    manager: bench
    operation: Update
    subresource: status
    time: "2026-01-01T00:00:01Z"
spec:
  replicas: 3
  revisionHistoryLimit: 10
  progressDeadlineSeconds: 600
  selector:
    matchLabels:
      deployment-name: web-00042
  strategy:
    type: RollingUpdate
    rollingUpdate: {maxSurge: 25%, maxUnavailable: 25%}
  template:
    metadata:
      labels:
        deployment-name: web-00042
    spec:
      containers:
      - name: nginx
        image: nginx:latest
        imagePullPolicy: Always
        terminationMessagePath: /dev/termination-log
        terminationMessagePolicy: File
        resources: {}
      dnsPolicy: ClusterFirst
      restartPolicy: Always
      schedulerName: default-scheduler
      securityContext: {}
      terminationGracePeriodSeconds: 30
status:
  observedGeneration: 1
  replicas: 3
  readyReplicas: 3
  availableReplicas: 3
  updatedReplicas: 3
`

// object decodes YAML the way Kubernetes' unstructured does (whole numbers
// as int64).
func object(tb testing.TB, y string) map[string]any {
	tb.Helper()
	j, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		tb.Fatal(err)
	}
	var out map[string]any
	if err := utiljson.Unmarshal(j, &out); err != nil {
		tb.Fatal(err)
	}
	return out
}

// newParent returns the parent; fresh drops its status, as on creation.
func newParent(tb testing.TB, fresh bool) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: object(tb, parentYAML)}
	if fresh {
		delete(u.Object, "status")
		u.SetManagedFields(u.GetManagedFields()[:1])
	}
	return u
}

// storefrontYAML is a Storefront, the richer example template (a bucket, and
// a Deployment once the bucket exists), as the engine reads it once
// reconciled.
const storefrontYAML = `
apiVersion: apps.cuengine.dev/v1
kind: Storefront
metadata:
  name: shop-00042
  namespace: bench
  uid: 0a1b2c3d-0000-4000-8000-200000000042
  resourceVersion: "123470"
  generation: 1
  creationTimestamp: "2026-01-01T00:00:00Z"
  labels: {team: web}
  finalizers: [engine.cuengine.dev/resources]
spec:
  projectID: my-project
  bucketName: shop-assets-00042
  replicas: 2
status:
  bucket: shop-assets-00042-0a1b2c3d
  readyReplicas: 2
`

// storefrontObserved is what a settled Storefront's evaluation observes:
// the provider's view of its bucket and the live Deployment.
func storefrontObserved(tb testing.TB) map[string]any {
	return map[string]any{
		"assets": map[string]any{"name": "shop-assets-00042-0a1b2c3d", "url": "gs://shop-assets-00042-0a1b2c3d", "location": "US", "storageClass": "STANDARD"},
		"app":    object(tb, deploymentYAML),
	}
}

// storefrontParent returns the Storefront; fresh drops its status, as on
// creation.
func storefrontParent(tb testing.TB, fresh bool) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: object(tb, storefrontYAML)}
	if fresh {
		delete(u.Object, "status")
	}
	return u
}

// cpuTime is the CPU time the process has used so far. On a shared
// machine it varies less than the wall clock, which also counts the time
// spent waiting for a core; it includes the garbage collector's work.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports the CPU time per operation since start.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
}
