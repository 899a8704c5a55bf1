package main

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
)

// deploymentOwnerKey is the field index of Deployments by the name of the
// MyKind that controls them.
const deploymentOwnerKey = ".metadata.controller"

// MyKindReconciler reconciles a MyKind object: one nginx Deployment named
// spec.deploymentName with spec.replicas replicas, and the Deployment's
// ready replicas in status.
type MyKindReconciler struct {
	client.Client
	Recorder recorder.EventRecorder
}

// Reconcile brings one MyKind's Deployment and status in line with its spec.
func (r *MyKindReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var myKind MyKind
	if err := r.Get(ctx, req.NamespacedName, &myKind); err != nil {
		// Not found: it was deleted, and its Deployment is garbage-collected.
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if err := r.cleanupOwnedResources(ctx, &myKind); err != nil {
		return ctrl.Result{}, fmt.Errorf("cleaning up old Deployments: %w", err)
	}
	var deployment appsv1.Deployment
	err := r.Get(ctx, client.ObjectKey{Namespace: myKind.Namespace, Name: myKind.Spec.DeploymentName}, &deployment)
	if apierrors.IsNotFound(err) {
		return ctrl.Result{}, r.createDeployment(ctx, &myKind)
	}
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("getting Deployment: %w", err)
	}
	if scaled, err := r.syncReplicas(ctx, &myKind, &deployment); err != nil || scaled {
		// The Deployment's update event brings us back for the status.
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, r.updateStatus(ctx, &myKind, &deployment)
}

// cleanupOwnedResources deletes the Deployments controlled by myKind whose
// name is no longer spec.deploymentName.
func (r *MyKindReconciler) cleanupOwnedResources(ctx context.Context, myKind *MyKind) error {
	var deployments appsv1.DeploymentList
	if err := r.List(ctx, &deployments, client.InNamespace(myKind.Namespace), client.MatchingFields{deploymentOwnerKey: myKind.Name}); err != nil {
		return err
	}
	for i := range deployments.Items {
		depl := &deployments.Items[i]
		if depl.Name == myKind.Spec.DeploymentName {
			continue
		}
		if err := r.Delete(ctx, depl); client.IgnoreNotFound(err) != nil {
			return err
		}
		ctrl.LoggerFrom(ctx).Info("deleted old Deployment", "deployment", depl.Name)
		r.Recorder.Eventf(myKind, nil, corev1.EventTypeNormal, "Deleted", "Delete", "Deleted deployment %q", depl.Name)
	}
	return nil
}

// createDeployment creates the MyKind's Deployment.
func (r *MyKindReconciler) createDeployment(ctx context.Context, myKind *MyKind) error {
	deployment := buildDeployment(myKind)
	if err := r.Create(ctx, deployment); err != nil {
		return fmt.Errorf("creating Deployment: %w", err)
	}
	ctrl.LoggerFrom(ctx).Info("created Deployment", "deployment", deployment.Name)
	r.Recorder.Eventf(myKind, nil, corev1.EventTypeNormal, "Created", "Create", "Created deployment %q", deployment.Name)
	return nil
}

// syncReplicas sets the Deployment's replicas to the MyKind's, reporting
// whether it had to.
func (r *MyKindReconciler) syncReplicas(ctx context.Context, myKind *MyKind, deployment *appsv1.Deployment) (bool, error) {
	expected := desiredReplicas(myKind)
	if deployment.Spec.Replicas != nil && *deployment.Spec.Replicas == expected {
		return false, nil
	}
	deployment.Spec.Replicas = &expected
	if err := r.Update(ctx, deployment); err != nil {
		return false, fmt.Errorf("updating Deployment replicas: %w", err)
	}
	ctrl.LoggerFrom(ctx).Info("scaled Deployment", "deployment", deployment.Name, "replicas", expected)
	r.Recorder.Eventf(myKind, nil, corev1.EventTypeNormal, "Scaled", "Scale", "Scaled deployment %q to %d replicas", deployment.Name, expected)
	return true, nil
}

// updateStatus copies the Deployment's ready replicas into the MyKind's
// status, writing only when the value changed.
func (r *MyKindReconciler) updateStatus(ctx context.Context, myKind *MyKind, deployment *appsv1.Deployment) error {
	if myKind.Status.ReadyReplicas == deployment.Status.ReadyReplicas {
		return nil
	}
	myKind.Status.ReadyReplicas = deployment.Status.ReadyReplicas
	if err := r.Status().Update(ctx, myKind); err != nil {
		return fmt.Errorf("updating MyKind status: %w", err)
	}
	return nil
}

// desiredReplicas is spec.replicas, one when unset.
func desiredReplicas(myKind *MyKind) int32 {
	if myKind.Spec.Replicas != nil {
		return *myKind.Spec.Replicas
	}
	return 1
}

// buildDeployment returns the Deployment a MyKind asks for.
func buildDeployment(myKind *MyKind) *appsv1.Deployment {
	replicas := desiredReplicas(myKind)
	labels := map[string]string{"deployment-name": myKind.Spec.DeploymentName}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Name:            myKind.Spec.DeploymentName,
			Namespace:       myKind.Namespace,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(myKind, GroupVersion.WithKind("MyKind"))},
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "nginx", Image: "nginx:latest"}},
				},
			},
		},
	}
}

// indexDeploymentOwner returns the name of the MyKind controlling a
// Deployment, for the deploymentOwnerKey index.
func indexDeploymentOwner(obj client.Object) []string {
	owner := metav1.GetControllerOf(obj)
	if owner == nil || owner.APIVersion != GroupVersion.String() || owner.Kind != "MyKind" {
		return nil
	}
	return []string{owner.Name}
}

// SetupWithManager registers the owner index and the controller, which
// watches MyKinds and the Deployments they own.
func (r *MyKindReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, workers int) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &appsv1.Deployment{}, deploymentOwnerKey, indexDeploymentOwner); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&MyKind{}).
		Owns(&appsv1.Deployment{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(r)
}
