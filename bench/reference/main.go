// Command reference is the Kubebuilder MyKind sample controller written by
// hand on controller-runtime: a typed MyKind (webapp.my.domain/v1) owning one
// self-healing nginx Deployment. It is the yardstick the benchmark harness
// (bench/harness) compares the engine against: idiomatic, neither
// deliberately slow nor tuned.
package main

import (
	"flag"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

func main() {
	os.Exit(run())
}

// run parses the flags (controller-runtime registers --kubeconfig), starts
// the manager and blocks until SIGTERM or SIGINT.
func run() int {
	var metricsAddr, probeAddr, pprofAddr string
	var workers int
	flag.StringVar(&metricsAddr, "metrics-bind-address", "0", `address of the metrics endpoint ("0" disables it)`)
	flag.StringVar(&probeAddr, "health-probe-bind-address", "0", `address of the health probes ("0" disables them)`)
	flag.StringVar(&pprofAddr, "pprof-bind-address", "0", `address of the Go profiler's /debug/pprof endpoints ("0" disables them)`)
	flag.IntVar(&workers, "max-concurrent-reconciles", 4, "reconcile workers")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	setupLog := ctrl.Log.WithName("setup")

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		setupLog.Error(err, "unable to build the scheme")
		return 1
	}
	if err := AddToScheme(scheme); err != nil {
		setupLog.Error(err, "unable to build the scheme")
		return 1
	}
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress: probeAddr,
		PprofBindAddress:       pprofAddr,
	})
	if err != nil {
		setupLog.Error(err, "unable to create the manager")
		return 1
	}
	ctx := ctrl.SetupSignalHandler()
	r := &MyKindReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("mykind-controller")}
	if err := r.SetupWithManager(ctx, mgr, workers); err != nil {
		setupLog.Error(err, "unable to create the controller", "controller", "MyKind")
		return 1
	}
	setupLog.Info("starting manager")
	if err := mgr.Start(ctx); err != nil {
		setupLog.Error(err, "problem running manager")
		return 1
	}
	return 0
}
