package harness

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Images before and after the template edit of phase (e).
const (
	imageBefore = "nginx:latest"
	imageAfter  = "nginx:1.27"
)

// workload is the set of parents of one run and the actions on them.
type workload struct {
	*env
	w       *watcher
	n       int
	clients int

	replicas     []int32        // desired replicas, by parent index
	byDeployment map[string]int // deployment name -> parent index
	byParent     map[string]int // MyKind name -> parent index
}

// newWorkload names n parents, with 1 to 3 replicas each.
func newWorkload(e *env, w *watcher, n, clients int) *workload {
	wl := &workload{env: e, w: w, n: n, clients: clients,
		replicas: make([]int32, n), byDeployment: map[string]int{}, byParent: map[string]int{}}
	for i := range n {
		wl.replicas[i] = int32(i%3 + 1)
		wl.byDeployment[deploymentName(i)] = i
		wl.byParent[parentName(i)] = i
	}
	return wl
}

func parentName(i int) string     { return fmt.Sprintf("mk-%05d", i) }
func deploymentName(i int) string { return fmt.Sprintf("web-%05d", i) }

// everyTenth returns the indexes i < n with i%10 == offset: 10% of the
// parents.
func everyTenth(n, offset int) []int {
	var out []int
	for i := offset; i < n; i += 10 {
		out = append(out, i)
	}
	return out
}

// forEach runs fn for 0..n-1 with the harness's client concurrency,
// stopping at the first error.
func (wl *workload) forEach(ctx context.Context, idx []int, fn func(ctx context.Context, i int) error) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(wl.clients)
	for _, i := range idx {
		g.Go(func() error { return fn(ctx, i) })
	}
	return g.Wait()
}

// all returns 0..n-1.
func (wl *workload) all() []int {
	out := make([]int, wl.n)
	for i := range out {
		out[i] = i
	}
	return out
}

// myKind returns parent i as the API sees it.
func (wl *workload) myKind(namespace, name, deployment string, replicas int32) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{"deploymentName": deployment, "replicas": int64(replicas)},
	}}
	u.SetAPIVersion("webapp.my.domain/v1")
	u.SetKind("MyKind")
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

// createMyKind creates parent i.
func (wl *workload) createMyKind(ctx context.Context, i int) error {
	u := wl.myKind(benchNamespace, parentName(i), deploymentName(i), wl.replicas[i])
	if _, err := wl.dyn.Resource(myKindGVR).Namespace(benchNamespace).Create(ctx, u, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating MyKind %s: %w", u.GetName(), err)
	}
	return nil
}

// readyConditions are the conditions the Deployment controller sets once a
// rollout is complete.
var readyConditions = []appsv1.DeploymentCondition{
	{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"},
	{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"},
}

// setReady writes Deployment i's status as a Deployment controller would
// once every replica is ready.
func (wl *workload) setReady(ctx context.Context, i int) error {
	obj, ok := wl.w.get(onDeployments, benchNamespace, deploymentName(i))
	if !ok {
		return fmt.Errorf("deployment %s is not in the cache", deploymentName(i))
	}
	d := obj.(*appsv1.Deployment).DeepCopy()
	for {
		r := int32(1)
		if d.Spec.Replicas != nil {
			r = *d.Spec.Replicas
		}
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: r,
			ReadyReplicas: r, AvailableReplicas: r, UpdatedReplicas: r, Conditions: readyConditions}
		_, err := wl.cs.AppsV1().Deployments(benchNamespace).UpdateStatus(ctx, d, metav1.UpdateOptions{})
		if !apierrors.IsConflict(err) {
			return err
		}
		if d, err = wl.cs.AppsV1().Deployments(benchNamespace).Get(ctx, d.Name, metav1.GetOptions{}); err != nil {
			return err
		}
	}
}

// deleteDeployment deletes Deployment i.
func (wl *workload) deleteDeployment(ctx context.Context, i int) error {
	err := wl.cs.AppsV1().Deployments(benchNamespace).Delete(ctx, deploymentName(i), metav1.DeleteOptions{})
	if err != nil {
		return fmt.Errorf("deleting deployment %s: %w", deploymentName(i), err)
	}
	return nil
}

// scale patches parent i's spec.replicas to its desired value.
func (wl *workload) scale(ctx context.Context, i int) error {
	patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, wl.replicas[i])
	_, err := wl.dyn.Resource(myKindGVR).Namespace(benchNamespace).Patch(ctx, parentName(i), "application/merge-patch+json", patch, metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("scaling MyKind %s: %w", parentName(i), err)
	}
	return nil
}

// createDeployment creates Deployment i directly, as the raw limit.
func (wl *workload) createDeployment(ctx context.Context, i int) error {
	replicas := wl.replicas[i]
	labels := map[string]string{"deployment-name": deploymentName(i)}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: deploymentName(i), Namespace: benchNamespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: imageBefore}}},
			},
		},
	}
	if _, err := wl.cs.AppsV1().Deployments(benchNamespace).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating deployment %s: %w", d.Name, err)
	}
	return nil
}

// deploymentOf returns the parent index of a Deployment in the bench
// namespace, and whether it is one of the workload's.
func (wl *workload) deploymentOf(obj any) (*appsv1.Deployment, int, bool) {
	d, ok := obj.(*appsv1.Deployment)
	if !ok {
		return nil, 0, false
	}
	i, ok := wl.byDeployment[d.Name]
	return d, i, ok
}

// hasReplicas reports whether a Deployment of the workload has its parent's
// desired replicas.
func (wl *workload) hasReplicas(obj any) bool {
	d, i, ok := wl.deploymentOf(obj)
	return ok && d.Spec.Replicas != nil && *d.Spec.Replicas == wl.replicas[i]
}

// hasImage reports whether a Deployment of the workload runs image.
func (wl *workload) hasImage(image string) func(any) bool {
	return func(obj any) bool {
		d, _, ok := wl.deploymentOf(obj)
		if !ok {
			return false
		}
		c := d.Spec.Template.Spec.Containers
		return len(c) == 1 && c[0].Image == image
	}
}

// statusFollows reports whether a MyKind's status.readyReplicas equals its
// desired replicas.
func (wl *workload) statusFollows(obj any) bool {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return false
	}
	i, ok := wl.byParent[u.GetName()]
	if !ok {
		return false
	}
	ready, _, _ := unstructured.NestedInt64(u.Object, "status", "readyReplicas")
	return ready == int64(wl.replicas[i])
}

// errNotSupported reports a phase the controller cannot do, such as a
// template edit without hot reload.
var errNotSupported = errors.New("not supported")

// warmUp creates one parent in the warm-up namespace and waits for its
// Deployment: the controller is running and its caches are synced. It
// returns when the harness's informers saw the Deployment.
func (wl *workload) warmUp(ctx context.Context, log *logger, alive func() error) (time.Time, error) {
	t, err := wl.createWarmUp(ctx)
	if err != nil {
		return time.Time{}, err
	}
	return wl.awaitWarmUp(ctx, t, log, alive)
}

// createWarmUp tracks the warm-up parent's Deployment and creates the
// parent; a controller started later finds it there.
func (wl *workload) createWarmUp(ctx context.Context) (*tracking, error) {
	t := wl.w.track(goal{on: onDeployments, namespace: warmupNamespace, want: 1, ok: func(any) bool { return true }})
	u := wl.myKind(warmupNamespace, "warmup", "warmup", 1)
	if _, err := wl.dyn.Resource(myKindGVR).Namespace(warmupNamespace).Create(ctx, u, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating the warm-up MyKind: %w", err)
	}
	return t, nil
}

// awaitWarmUp waits for the warm-up Deployment that t tracks and returns
// when the harness's informers saw it.
func (wl *workload) awaitWarmUp(ctx context.Context, t *tracking, log *logger, alive func() error) (time.Time, error) {
	if err := wl.await(ctx, t, "warm-up", warmupTimeout, 0, log, alive); err != nil {
		return time.Time{}, err
	}
	return t.reachedAt, nil
}

// Timing of waits.
const (
	warmupTimeout = 2 * time.Minute
	progressEvery = 5 * time.Second
)

// await waits until t's goal is reached, printing progress every few
// seconds. It fails when the timeout passes, when alive fails, or, with
// stall > 0, with errNotSupported when nothing met the goal within stall.
func (wl *workload) await(ctx context.Context, t *tracking, what string, timeout, stall time.Duration, log *logger, alive func() error) error {
	start := time.Now()
	ticker := time.NewTicker(progressEvery)
	defer ticker.Stop()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		select {
		case <-t.reached:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("%s: timed out after %s with %d/%d done", what, timeout, wl.w.progress(t), t.want)
		case <-ticker.C:
			if err := alive(); err != nil {
				return err
			}
			done := wl.w.progress(t)
			log.printf("  %s: %d/%d after %s", what, done, t.want, since(start))
			if stall > 0 && done == 0 && time.Since(start) >= stall {
				return fmt.Errorf("%s: nothing changed within %s: %w", what, stall, errNotSupported)
			}
		}
	}
}
