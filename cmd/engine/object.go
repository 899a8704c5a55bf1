package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/contract"
)

// objectOptions are the flags of the commands that act on one parent:
// pause, resume and reconcile.
type objectOptions struct {
	kubeconfig    string
	namespace     string
	all           bool // every object of the kind in the namespace
	allNamespaces bool // every object of the kind
	wait          time.Duration
}

// objectPollInterval is how often --wait reads the parent.
var objectPollInterval = 500 * time.Millisecond

func newObjectCommands() []*cobra.Command {
	o := &objectOptions{}
	flags := func(cmd *cobra.Command, wait string) *cobra.Command {
		cmd.Flags().StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster)")
		cmd.Flags().StringVarP(&o.namespace, "namespace", "n", "", "the object's namespace (default: the kubeconfig context's, or default)")
		cmd.Flags().BoolVar(&o.all, "all", false, "every object of KIND in the namespace (KIND alone, no /NAME); objects created later are not included")
		cmd.Flags().BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "with --all: every object of KIND in every namespace")
		cmd.Flags().DurationVar(&o.wait, "wait", 0, wait)
		return cmd
	}
	const objectHelp = `KIND/NAME names one object as kubectl takes it (mykind/web,
MyKind.webapp.my.domain/web). The command writes an annotation on it with
your kubeconfig's rights (patch on the kind); the engine acts within
seconds. It needs no access to the engine's pod. KIND --all acts on every
object of the kind in the namespace (-A: in every namespace) that exists
now, as kubectl annotate --all does.`
	pause := flags(&cobra.Command{
		Use:   "pause KIND/NAME | KIND --all",
		Short: "Stop the engine writing anything for one object",
		Long: `Pause sets engine.cuengine.dev/paused: "true" on the object: the engine writes
nothing for it (children, external resources, status) but the Paused
condition, does not correct drift, and holds its deletion at the finalizer.
Resume ends it.

` + objectHelp,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), cmd.OutOrStdout(), args[0], pauseObject)
		},
	}, "wait up to this long for the engine to report the object Paused")
	resume := flags(&cobra.Command{
		Use:   "resume KIND/NAME | KIND --all",
		Short: "Let the engine reconcile a paused object again",
		Long: `Resume removes engine.cuengine.dev/paused from the object: the engine reconciles
it once, putting back what drifted and applying what changed meanwhile.

` + objectHelp,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), cmd.OutOrStdout(), args[0], resumeObject)
		},
	}, "wait up to this long for the engine to report the object no longer paused")
	reconcile := flags(&cobra.Command{
		Use:   "reconcile KIND/NAME | KIND --all",
		Short: "Reconcile one object now, its external resources observed again",
		Long: `Reconcile sets engine.cuengine.dev/reconcile-requested-at to a new value: the
engine reconciles the object at once, whatever the resource resync, and its
providers observe its external resources again. With --wait it waits until
status.lastHandledReconcileAt shows the value, then prints the conditions of
that reconcile; it fails when the object is Stalled.

` + objectHelp,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), cmd.OutOrStdout(), args[0], reconcileObject)
		},
	}, "wait up to this long for the engine to handle the request, then print the object's conditions")
	return []*cobra.Command{pause, resume, reconcile}
}

// objectAction is what one command does to an object: the annotation
// patch, what to print, and when a --wait is over.
type objectAction func(now time.Time) (annotations map[string]any, done string, handled func(*unstructured.Unstructured) (bool, error))

func pauseObject(time.Time) (map[string]any, string, func(*unstructured.Unstructured) (bool, error)) {
	return map[string]any{contract.AnnotationPaused: "true"}, "paused: the engine writes nothing for it until `engine resume`",
		func(u *unstructured.Unstructured) (bool, error) {
			return contract.ConditionIs(u, contract.ConditionPaused, metav1.ConditionTrue), nil
		}
}

func resumeObject(time.Time) (map[string]any, string, func(*unstructured.Unstructured) (bool, error)) {
	return map[string]any{contract.AnnotationPaused: nil}, "resumed: the engine reconciles it",
		func(u *unstructured.Unstructured) (bool, error) {
			return contract.FindCondition(u, contract.ConditionPaused) == nil, nil
		}
}

func reconcileObject(now time.Time) (map[string]any, string, func(*unstructured.Unstructured) (bool, error)) {
	token := now.UTC().Format(time.RFC3339Nano)
	return map[string]any{contract.AnnotationReconcileRequestedAt: token}, "reconcile requested (" + token + ")",
		func(u *unstructured.Unstructured) (bool, error) {
			got, _, _ := unstructured.NestedString(u.Object, "status", contract.StatusLastHandledReconcileAt)
			if got != token {
				return false, nil
			}
			if contract.Paused(u) {
				return false, errors.New("it is paused: the engine does not reconcile it until `engine resume`")
			}
			return true, nil
		}
}

func (o *objectOptions) run(ctx context.Context, w io.Writer, arg string, act objectAction) error {
	kindArg, name, named := strings.Cut(arg, "/")
	switch {
	case o.all && named:
		return fmt.Errorf("--all takes KIND alone, not %q", arg)
	case o.allNamespaces && !o.all:
		return errors.New("--all-namespaces goes with --all")
	case !o.all && (kindArg == "" || name == ""):
		return fmt.Errorf("%q is not KIND/NAME (for example mykind/web), nor KIND with --all", arg)
	}
	cfg, err := (&runOptions{kubeconfig: o.kubeconfig}).restConfig()
	if err != nil {
		return err
	}
	ns := o.namespace
	if ns == "" && !o.allNamespaces {
		if ns, err = o.contextNamespace(); err != nil {
			return err
		}
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	mapper := kindMapper(dc)
	gvk, err := resolveKind(ctx, mapper, kindArg)
	if err != nil {
		return err
	}
	mapping, err := mapper.RESTMappingWithContext(ctx, gvk.GroupKind(), gvk.Version)
	if err != nil {
		return err
	}
	if mapping.Scope.Name() != meta.RESTScopeNameNamespace || o.allNamespaces {
		ns = ""
	}
	c, err := client.New(cfg, client.Options{Scheme: newScheme()})
	if err != nil {
		return err
	}
	keys := []types.NamespacedName{{Namespace: ns, Name: name}}
	if o.all {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			return err
		}
		keys = keys[:0]
		for i := range list.Items {
			keys = append(keys, client.ObjectKeyFromObject(&list.Items[i]))
		}
		if len(keys) == 0 {
			where := "in namespace " + ns
			if ns == "" {
				where = "in the cluster"
			}
			fmt.Fprintf(w, "no %s %s\n", gvk.Kind, where)
			return nil
		}
	}
	annotations, done, handled := act(time.Now())
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	if err != nil {
		return err
	}
	what := func(key types.NamespacedName) string {
		if key.Namespace != "" {
			return fmt.Sprintf("%s %s/%s", gvk.Kind, key.Namespace, key.Name)
		}
		return fmt.Sprintf("%s %s", gvk.Kind, key.Name)
	}
	for _, key := range keys {
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(gvk)
		obj.SetNamespace(key.Namespace)
		obj.SetName(key.Name)
		if err := c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
			return err
		}
		fmt.Fprintf(w, "%s %s\n", what(key), done)
	}
	if o.wait <= 0 {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, o.wait)
	defer cancel()
	var failed error
	for _, key := range keys {
		if err := o.await(wctx, c, gvk, key, what(key), w, handled); err != nil {
			if wctx.Err() != nil || len(keys) == 1 {
				return err
			}
			failed = errors.Join(failed, err)
		}
	}
	return failed
}

// await waits, until ctx ends, for the engine to have handled the object
// at key, then prints its conditions.
func (o *objectOptions) await(ctx context.Context, c client.Client, gvk schema.GroupVersionKind, key types.NamespacedName, what string, w io.Writer, handled func(*unstructured.Unstructured) (bool, error)) error {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	for {
		if err := c.Get(ctx, key, obj); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("%s: the engine did not act within %s (is it running?)", what, o.wait)
			}
			return err
		}
		ok, err := handled(obj)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if ok {
			return printConditions(w, what, obj)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: the engine did not act within %s (is it running?)", what, o.wait)
		case <-time.After(objectPollInterval):
		}
	}
}

// printConditions prints the engine's conditions on the object, and fails
// when it is Stalled: a person must act.
func printConditions(w io.Writer, what string, obj *unstructured.Unstructured) error {
	for _, t := range []string{contract.ConditionReady, contract.ConditionSynced, contract.ConditionStalled, contract.ConditionPaused} {
		if c := contract.FindCondition(obj, t); c != nil {
			fmt.Fprintf(w, "  %s=%s %s: %s\n", c.Type, c.Status, c.Reason, c.Message)
		}
	}
	if c := contract.FindCondition(obj, contract.ConditionStalled); c != nil && c.Status == metav1.ConditionTrue && c.Reason != contract.ReasonPaused {
		return fmt.Errorf("%s is stalled (%s): %s", what, c.Reason, c.Message)
	}
	return nil
}

// contextNamespace is the namespace of the kubeconfig's current context,
// or default, as kubectl takes it.
func (o *objectOptions) contextNamespace() (string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if o.kubeconfig != "" {
		rules.ExplicitPath = o.kubeconfig
	}
	ns, _, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).Namespace()
	return ns, err
}
