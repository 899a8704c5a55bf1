// Package e2e holds the end-to-end tests: the real engine binary (bin/engine)
// against a full local cluster (internal/localcluster: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, kwok), driven with the real
// kubectl (bin/kubectl). `make test` builds all of them first.
package e2e
