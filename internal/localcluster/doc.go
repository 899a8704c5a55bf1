// Package localcluster starts a real local Kubernetes control plane from the
// binaries that `make assets` builds into bin/, for tests and for the
// `engine dev` command. No containers are involved.
//
// The package owns everything about that control plane: finding the
// binaries (AssetsDir), choosing free loopback ports, generating the
// serving certificate, service-account key and admin token, starting and
// supervising the processes (etcd, kube-apiserver and, in full mode,
// kube-controller-manager, kube-scheduler and kwok with one fake node),
// writing an admin kubeconfig, installing CRDs, and stopping it all again.
//
// A bare cluster (Options.Full false) is apiserver and etcd only, started
// through controller-runtime's envtest: fast, and enough for tests that only
// need the API. A full cluster also runs the controllers, the scheduler and a
// kwok-simulated node, so Deployments get ReplicaSets and Ready pods and
// owner-reference garbage collection works. Its apiserver calls a webhook
// given as a Service at one of the Service's endpoints
// (--enable-aggregator-routing): there is no cluster DNS, and the pods on
// the fake node serve nothing, so a test points an EndpointSlice of the
// Service at a process on this machine.
package localcluster
