// Package harness benchmarks the engine against a hand-written
// controller-runtime controller (bench/reference) doing the same job: one
// nginx Deployment per MyKind, its replicas kept in line, its ready replicas
// copied into the MyKind's status.
//
// For each controller run it starts a fresh bare control plane (etcd and
// kube-apiserver, from internal/localcluster; no controllers, so the harness
// itself plays the Deployment controller by writing Deployment status),
// installs the MyKind CRD that `engine crds` generates, starts the controller
// under test as a separate process, and times workload phases, each ending
// when the harness's informers (not polling) observe the expected state:
//
//	(a) create N MyKinds            -> N Deployments with the right replicas
//	(b) set every Deployment status -> every MyKind's status.readyReplicas
//	(c) delete 10% of Deployments   -> recreated
//	(d) change replicas on 10%      -> Deployments scaled
//	(e) edit the template's image   -> N Deployments rolled (engine only)
//
// It also records the controller process's CPU time and peak RSS from /proc,
// and the requests the controller made, by verb and resource, from the
// apiserver's own apiserver_request_total counters minus the harness's own
// requests (counted client-side). A raw run, the harness creating N
// Deployments itself, gives the apiserver's limit for phase (a).
//
// With the peer kro (Config.Controllers Kro, KroDefaults), kro runs the
// same phases on a control plane of its own, with its CRDs and the
// ResourceGraphDefinition of kro-mykind.yaml, equivalent to the MyKind
// template; phase (e) edits the image there.
//
// With Config.Shards, the sharding benchmark replaces the controllers: the
// engine without sharding, then with --sharding over each count of
// replicas (separate processes), phases (a) to (d), and per replica the
// parents labelled with its shard, its peak RSS and CPU (sharding.go,
// report_sharding.go).
//
// With Config.Scale, the scale benchmark replaces the phases: N parents
// with replicas 0, each controller with its default flags, the time until
// every parent is Ready, CPU and memory, then a restart with the N parents
// in place (scale.go, report_scale.go).
//
// The package owns the workload, the measurements and the report; it does
// not own the control plane (internal/localcluster) or the controllers.
package harness
