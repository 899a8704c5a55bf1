package main

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the API group and version of MyKind.
var GroupVersion = schema.GroupVersion{Group: "webapp.my.domain", Version: "v1"}

// AddToScheme adds the MyKind types to a scheme.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &MyKind{}, &MyKindList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// MyKindSpec defines the desired state of MyKind.
type MyKindSpec struct {
	// DeploymentName is the name of the Deployment the controller creates.
	DeploymentName string `json:"deploymentName"`
	// Replicas is the number of replicas of the Deployment; nil means one.
	Replicas *int32 `json:"replicas,omitempty"`
}

// MyKindStatus defines the observed state of MyKind.
type MyKindStatus struct {
	// ReadyReplicas is the number of ready replicas of the Deployment.
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
}

// MyKind owns one nginx Deployment.
type MyKind struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   MyKindSpec   `json:"spec,omitempty"`
	Status MyKindStatus `json:"status,omitempty"`
}

// MyKindList contains a list of MyKind.
type MyKindList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MyKind `json:"items"`
}

// DeepCopyInto copies the spec into out.
func (in *MyKindSpec) DeepCopyInto(out *MyKindSpec) {
	*out = *in
	if in.Replicas != nil {
		r := *in.Replicas
		out.Replicas = &r
	}
}

// DeepCopyInto copies the MyKind into out.
func (in *MyKind) DeepCopyInto(out *MyKind) {
	*out = *in
	out.TypeMeta = in.TypeMeta
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	in.Spec.DeepCopyInto(&out.Spec)
	out.Status = in.Status
}

// DeepCopy returns a copy of the MyKind.
func (in *MyKind) DeepCopy() *MyKind {
	if in == nil {
		return nil
	}
	out := new(MyKind)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *MyKind) DeepCopyObject() runtime.Object {
	if c := in.DeepCopy(); c != nil {
		return c
	}
	return nil
}

// DeepCopyInto copies the list into out.
func (in *MyKindList) DeepCopyInto(out *MyKindList) {
	*out = *in
	out.TypeMeta = in.TypeMeta
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]MyKind, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
}

// DeepCopy returns a copy of the list.
func (in *MyKindList) DeepCopy() *MyKindList {
	if in == nil {
		return nil
	}
	out := new(MyKindList)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *MyKindList) DeepCopyObject() runtime.Object {
	if c := in.DeepCopy(); c != nil {
		return c
	}
	return nil
}
