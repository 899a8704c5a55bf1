package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/revisions"
	"github.com/cuengine/engine/templates/policy"
)

// rolloutOptions are the flags of `engine rollout`.
type rolloutOptions struct {
	kubeconfig        string
	revisionNamespace string
	output            string
	wait              time.Duration
	watch             bool
}

func newRolloutCommand() *cobra.Command {
	o := &rolloutOptions{}
	cmd := &cobra.Command{
		Use:   "rollout",
		Short: "Show and steer the rollout of a kind's template revisions",
		Long: `Every version of a kind's template that the engine serves is a revision, stored
in the cluster as a ControllerRevision; a new revision reaches the kind's
objects as the template's rollout block says (at once, or in waves with
health gates). These commands read and change that state in the cluster
(--kubeconfig, $KUBECONFIG, or in-cluster); the engine acts on the changes
within seconds. They need no access to the engine's pod.

KIND is a kind or resource as kubectl takes it: MyKind, mykind, mykinds, a
short name, or with its group, MyKind.webapp.my.domain. The revisions are
found in any namespace by their label, or in --revision-namespace (the
engine's --revision-namespace). The newest revision is the one rolling out:
the target.`,
	}
	cmd.PersistentFlags().StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster)")
	cmd.PersistentFlags().StringVar(&o.revisionNamespace, "revision-namespace", "", "namespace of the revisions (default: found by their label in any namespace)")
	kindArg := func(use, short, long string, run func(context.Context, io.Writer, *rolloutSession) error) *cobra.Command {
		return &cobra.Command{
			Use:   use + " KIND",
			Short: short,
			Long:  long,
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				s, err := o.connect(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				return run(cmd.Context(), cmd.OutOrStdout(), s)
			},
		}
	}
	status := kindArg("status", "Per revision, how many objects run it and are Ready, and where the rollout stands", `Status prints one row per revision that objects of the kind run, and the target
(marked *): its phase (Pending, Held, Progressing, Paused, Complete,
RolledBack, Superseded), the wave in progress, the objects on it, how many of
them are Ready on it as the rollout's health gates count them (reconciled at
their current generation, Synced and Ready), and how many are pinned to it
(annotation engine.cuengine.dev/template-revision). Then why the target is
where it is: what a held revision would delete, why one rolled back, and the
objects that were failing before they moved to it, which its health gates
do not count.

With --watch, it redraws the table whenever it changes (on a terminal; elsewhere
it prints each new table after a "---" line with the time) until the target's
rollout ends: exit status 0 when it is Complete, 1 when it rolled back. A newer
revision that supersedes the target becomes the one watched.`, o.status)
	status.Flags().StringVarP(&o.output, "output", "o", "", `output format: "" (a table) or json`)
	status.Flags().BoolVarP(&o.watch, "watch", "w", false, "redraw until the rollout ends; exit 1 when it rolls back")
	history := kindArg("history", "Every stored revision of the kind, oldest first", `History prints every stored revision of the kind, oldest first: its number,
content hash, phase, age, the objects that run it, the objects pinned to it
(annotation engine.cuengine.dev/template-revision; "(refused)" when the
newest template's rollout policy does not let the engine follow them, or
the revision was rolled back or is held), and the engine's last message
about it. Then which revisions pins may select (rollout: pins).`, o.history)
	history.Flags().StringVarP(&o.output, "output", "o", "", `output format: "" (a table) or json`)
	pause := kindArg("pause", "Stop the rollout of the target revision between waves", `Pause stops the rollout of the target revision before its next wave: objects
already on it stay there and are still health-checked (a failure still rolls
back), no further object moves. Resume continues it.`, o.pause)
	resume := kindArg("resume", "Continue a paused rollout, or confirm a held revision", `Resume continues a paused rollout. On a held revision (one that would delete
children the current revision produces) it confirms the deletions, and the
revision rolls out.`, o.resume)
	resume.Flags().DurationVar(&o.wait, "wait", 0, "wait up to this long for the rollout to end (Complete or RolledBack), printing its progress")
	undo := kindArg("undo", "Return every object to the previous complete revision", `Undo rolls the target revision back, in the middle of its rollout or after it
completed: every object on it returns to the previous complete revision (when
no other revision is complete, to the newest other one), and the target is
not tried again (its phase is RolledBack). It says which revision that is.
The next edit of the templates starts a new rollout.`, o.undo)
	undo.Flags().DurationVar(&o.wait, "wait", 0, "wait up to this long for the engine to roll back, printing its progress")
	cmd.AddCommand(status, history, pause, resume, undo)
	return cmd
}

// rolloutSession is a connection to the cluster, and the kind's revisions
// as read when it was made.
type rolloutSession struct {
	c client.Client
	// arg is the KIND as typed, to suggest commands.
	arg  string
	gvk  schema.GroupVersionKind
	revs *revisions.Stored
	// policies caches each revision's rollout policy, by name.
	policies map[string]*policy.Rollout
}

func (o *rolloutOptions) connect(ctx context.Context, arg string) (*rolloutSession, error) {
	if o.output != "" && o.output != "json" {
		return nil, fmt.Errorf("unknown output format %q: use -o json, or no -o for a table", o.output)
	}
	cfg, err := (&runOptions{kubeconfig: o.kubeconfig}).restConfig()
	if err != nil {
		return nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	gvk, err := resolveKind(ctx, kindMapper(dc), arg)
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: newScheme()})
	if err != nil {
		return nil, err
	}
	revs, err := revisions.Find(ctx, c, gvk.GroupKind(), o.revisionNamespace)
	if err != nil {
		return nil, err
	}
	return &rolloutSession{c: c, arg: arg, gvk: gvk, revs: revs, policies: map[string]*policy.Rollout{}}, nil
}

// parents lists the kind's objects in every namespace.
func (s *rolloutSession) parents(ctx context.Context) ([]unstructured.Unstructured, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(s.gvk.GroupVersion().WithKind(s.gvk.Kind + "List"))
	if err := s.c.List(ctx, list); err != nil {
		return nil, fmt.Errorf("listing the %s objects: %w", s.gvk.GroupKind().String(), err)
	}
	return list.Items, nil
}

// wavesOf returns how many waves a revision's rollout policy has, read from
// the template it stores; 0 when this engine cannot compile it.
func (s *rolloutSession) wavesOf(rev revisions.Revision) int {
	if p := s.policyOf(rev); p != nil {
		return len(p.Waves)
	}
	return 0
}

// policyOf returns a revision's rollout policy, read from the template it
// stores; nil when this engine cannot compile it.
func (s *rolloutSession) policyOf(rev revisions.Revision) *policy.Rollout {
	if p, ok := s.policies[rev.Name]; ok {
		return p
	}
	var p *policy.Rollout
	if cr := s.revs.Object(rev.Name); cr != nil {
		if t, err := revisions.LoadRevision(cr, s.gvk); err == nil {
			p = &t.Rollout
		}
	}
	s.policies[rev.Name] = p
	return p
}

// fleet is the status of the kind: the revisions as stored, and of the
// target's rollout what its policy says at now (the soak's length, a
// freeze).
func (s *rolloutSession) fleet(parents []unstructured.Unstructured, now time.Time) revisions.Fleet {
	st := revisions.FleetOf(s.revs, parents, s.wavesOf)
	target := s.revs.Target()
	p := s.policyOf(target)
	if p == nil {
		return st
	}
	t := &st.Target
	if since := t.SoakSince; since != nil {
		soak := p.SoakOf(target.Wave)
		t.Soak = soak.String()
		t.SoakLeft = max(since.Add(soak).Sub(now), 0).Round(time.Second).String()
	}
	switch target.Phase {
	case revisions.PhasePending, revisions.PhaseProgressing:
		if until, frozen := p.FrozenUntil(now); frozen {
			t.NextWaveAt = &until
		}
	}
	for i := range st.Revisions {
		if st.Revisions[i].Target {
			st.Revisions[i] = *t
		}
	}
	return st
}

func (o *rolloutOptions) status(ctx context.Context, w io.Writer, s *rolloutSession) error {
	if o.watch {
		if o.output != "" {
			return fmt.Errorf("--watch draws the table: use -o json without --watch")
		}
		return o.watchStatus(ctx, w, s)
	}
	parents, err := s.parents(ctx)
	if err != nil {
		return err
	}
	st := s.fleet(parents, time.Now())
	if o.output == "json" {
		return printJSON(w, st)
	}
	printStatus(w, st, s.arg)
	return nil
}

func (o *rolloutOptions) history(ctx context.Context, w io.Writer, s *rolloutSession) error {
	parents, err := s.parents(ctx)
	if err != nil {
		return err
	}
	on := revisions.ObjectsOn(parents)
	pv := s.pinView(parents)
	if o.output == "json" {
		return printJSON(w, historyOf(s.revs, on, pv))
	}
	printHistory(w, s.revs, on, pv, time.Now())
	return nil
}

// pinView reads the newest revision's rollout policy for pins from the
// template it stores (unknown when this engine cannot compile it).
func (s *rolloutSession) pinView(parents []unstructured.Unstructured) pinView {
	target := s.revs.Target()
	pv := pinView{pinned: revisions.PinnedTo(parents), newest: target.Number}
	if cr := s.revs.Object(target.Name); cr != nil {
		if t, err := revisions.LoadRevision(cr, s.gvk); err == nil {
			pv.pins = &t.Rollout.Pins
		}
	}
	return pv
}

func (o *rolloutOptions) pause(ctx context.Context, w io.Writer, s *rolloutSession) error {
	req, err := pauseRequest(s.revs, s.arg)
	if err != nil {
		return err
	}
	return s.send(ctx, w, req)
}

func (o *rolloutOptions) resume(ctx context.Context, w io.Writer, s *rolloutSession) error {
	req, err := resumeRequest(s.revs, s.arg)
	if err != nil {
		return err
	}
	if err := s.send(ctx, w, req); err != nil {
		return err
	}
	return o.waitFor(ctx, w, s, revisions.PhaseComplete, revisions.PhaseRolledBack, revisions.PhaseSuperseded)
}

func (o *rolloutOptions) undo(ctx context.Context, w io.Writer, s *rolloutSession) error {
	req, err := undoRequest(s.revs, s.arg)
	if err != nil {
		return err
	}
	if err := s.send(ctx, w, req); err != nil {
		return err
	}
	// A complete revision stays Complete until the engine sees the request.
	return o.waitFor(ctx, w, s, revisions.PhaseRolledBack, revisions.PhaseSuperseded)
}

// send writes a request into the target's annotations, with a merge patch
// of those annotations alone, and says what was done.
func (s *rolloutSession) send(ctx context.Context, w io.Writer, req request) error {
	target := s.revs.Target()
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": req.annotations}})
	if err != nil {
		return err
	}
	cr := &appsv1.ControllerRevision{}
	cr.Name, cr.Namespace = target.Name, s.revs.Namespace
	if err := s.c.Patch(ctx, cr, client.RawPatch(types.MergePatchType, body)); err != nil {
		return fmt.Errorf("annotating revision %d of %s (ControllerRevision %s/%s): %w", target.Number, s.revs.Kind, s.revs.Namespace, target.Name, err)
	}
	fmt.Fprintln(w, req.done)
	return nil
}
