//go:build tools

// Package tools pins k8s.io/kubernetes, whose commands (kube-apiserver,
// kube-controller-manager, kube-scheduler, kubectl) the Makefile's assets
// target builds into bin/. The module exists because k8s.io/kubernetes cannot
// be installed directly: its go.mod replaces the k8s.io staging modules with
// local paths, which this go.mod pins to their published v0.37.2 instead.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
