package localcluster

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"os"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// nodeName is the one fake node of a full cluster.
	nodeName = "kwok-node-0"
	// kwokAnnotation marks the nodes kwok manages.
	kwokAnnotation = "kwok.x-k8s.io/node"
	// kwokPodCIDR is where kwok takes (never routed) pod IPs from.
	kwokPodCIDR = "10.244.0.0/16"
	// kwokLeaseSeconds is the node lease kwok keeps renewed, as kubelet does.
	kwokLeaseSeconds = "40"
)

// kwokStages holds the kwok Stage configurations copied from kwok v0.8.0
// (node initialisation and heartbeat, pods becoming Ready, completing for
// Jobs, being deleted) and one of ours: a running pod marked NotReady by
// the node lifecycle controller is Ready again, as a kubelet reports it.
//
//go:embed kwok/*.yaml
var kwokStages embed.FS

// writeKwokStages writes all embedded stages into one multi-document file.
func writeKwokStages(path string) error {
	files, err := fs.Glob(kwokStages, "kwok/*.yaml")
	if err != nil {
		return fmt.Errorf("listing kwok stages: %w", err)
	}
	var buf bytes.Buffer
	for _, name := range files {
		data, err := kwokStages.ReadFile(name)
		if err != nil {
			return fmt.Errorf("reading kwok stage %s: %w", name, err)
		}
		buf.WriteString("---\n")
		buf.Write(data)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("writing kwok stages: %w", err)
	}
	return nil
}

// kwokArgs are the flags for kwok managing the annotated fake nodes.
func kwokArgs(kubeconfig, stagesFile string) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--config=" + stagesFile,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=" + kwokAnnotation + "=fake",
		"--node-lease-duration-seconds=" + kwokLeaseSeconds,
		"--cidr=" + kwokPodCIDR,
	}
}

// fakeNode returns the kwok-managed node: untainted, so ordinary pods
// schedule on it, with room for plenty of them.
func fakeNode() *corev1.Node {
	resources := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("1000"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        nodeName,
			Annotations: map[string]string{kwokAnnotation: "fake"},
			Labels: map[string]string{
				"type":                   "kwok",
				"kubernetes.io/hostname": nodeName,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     "amd64",
			},
		},
		Status: corev1.NodeStatus{Allocatable: resources, Capacity: resources},
	}
}

// nodeReady reports whether node has condition Ready True and no taints, so
// that pods can be scheduled on it.
func nodeReady(node *corev1.Node) bool {
	if len(node.Spec.Taints) > 0 {
		return false
	}
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}
