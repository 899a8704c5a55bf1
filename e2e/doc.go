// Package e2e holds the end-to-end tests: the real engine binary (bin/engine)
// against a full local cluster (internal/localcluster: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, kwok), driven with the real
// kubectl (bin/kubectl). `make test` builds all of them first. TestImage
// also builds the engine's image (make image) and runs it with podman,
// installed by hack/podman.sh where missing; it skips, saying so, only where
// no container runtime can be installed.
package e2e
