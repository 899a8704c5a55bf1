package diff

import (
	"context"
	"fmt"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/providers"
	"github.com/cuengine/engine/templates"
)

// Providers finds the provider a resource names.
type Providers interface {
	Get(name string) (providers.Provider, bool)
}

// planResources writes what the engine would do to each external resource
// of the parent, as its provider plans it (providers.Provider.Plan: read
// only), and to each resource the parent records that the template no
// longer renders (deleted or orphaned, as its recorded policy says).
func (d *Differ) planResources(ctx context.Context, parent *unstructured.Unstructured, rendered []templates.Resource, sum *Summary) {
	head := fmt.Sprintf("# %s %s/%s: resource", parent.GetKind(), parent.GetNamespace(), parent.GetName())
	records, err := contract.ResourceRecords(parent.GetAnnotations())
	if err != nil {
		sum.Failed++
		fmt.Fprintf(d.Out, "# %s %s/%s: %v\n", parent.GetKind(), parent.GetNamespace(), parent.GetName(), err)
		return
	}
	owner := providers.Owner{UID: string(parent.GetUID()), Namespace: parent.GetNamespace(), Name: parent.GetName(), Kind: parent.GetKind()}
	seen := map[string]bool{}
	for _, res := range rendered {
		seen[res.Name] = true
		rec, recorded := records[res.Name]
		where := res.Provider
		if recorded {
			where += " " + rec.ExternalName
		}
		if recorded && rec.Provider != res.Provider {
			sum.ResourcesReplaced++
			fmt.Fprintf(d.Out, "%s %s (%s): Replace: its provider changes from %s to %s: the %s resource is deleted (deletionPolicy %s) and a new one created\n",
				head, res.Name, where, rec.Provider, res.Provider, rec.Provider, rec.DeletionPolicy)
			continue
		}
		if d.Providers == nil {
			sum.ResourcesUnplanned++
			fmt.Fprintf(d.Out, "%s %s (%s): not planned (no provider plugins given)\n", head, res.Name, where)
			continue
		}
		p, ok := d.Providers.Get(res.Provider)
		if !ok {
			sum.Failed++
			fmt.Fprintf(d.Out, "%s %s (%s): not planned: no plugin serves provider %q\n", head, res.Name, where, res.Provider)
			continue
		}
		req := providers.Request{Name: res.Name, ExternalName: rec.ExternalName, Owner: owner, Spec: res.Spec, Settings: rec.Settings}
		if res.ConnectionSecret != "" && recorded {
			lost, err := d.secretMissing(ctx, parent.GetNamespace(), res.ConnectionSecret)
			if err != nil {
				sum.Failed++
				fmt.Fprintf(d.Out, "%s %s (%s): not planned: %v\n", head, res.Name, where, err)
				continue
			}
			req.ResetCredentials = lost
		}
		plan, err := p.Plan(ctx, req)
		if err != nil {
			sum.Failed++
			fmt.Fprintf(d.Out, "%s %s (%s): not planned: %v\n", head, res.Name, where, err)
			continue
		}
		d.writePlan(head+" "+res.Name+" ("+where+")", plan, sum)
	}
	names := make([]string, 0, len(records))
	for name := range records {
		if !seen[name] {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		rec := records[name]
		if rec.DeletionPolicy == templates.DeletionPolicyOrphan {
			sum.ResourcesOrphaned++
			fmt.Fprintf(d.Out, "%s %s (%s %s): Orphan: no longer in the template; left in place (deletionPolicy Orphan)\n", head, name, rec.Provider, rec.ExternalName)
			continue
		}
		sum.ResourcesDeleted++
		fmt.Fprintf(d.Out, "%s %s (%s %s): Delete: no longer in the template (deletionPolicy %s)\n", head, name, rec.Provider, rec.ExternalName, rec.DeletionPolicy)
	}
}

// writePlan writes one plan: its action, then a line per change; a
// sensitive change is said without its values.
func (d *Differ) writePlan(head string, plan providers.Plan, sum *Summary) {
	switch plan.Action {
	case providers.ActionNone:
		sum.ResourcesUnchanged++
		return
	case providers.ActionCreate:
		sum.ResourcesCreated++
	case providers.ActionUpdate:
		sum.ResourcesUpdated++
	case providers.ActionReplace:
		sum.ResourcesReplaced++
	case providers.ActionRefuse:
		sum.ResourcesRefused++
	}
	line := head + ": " + string(plan.Action)
	if plan.Reason != "" {
		line += ": " + plan.Reason
	}
	fmt.Fprintln(d.Out, line)
	changes := slices.Clone(plan.Changes)
	for _, c := range changes {
		switch {
		case c.Sensitive:
			fmt.Fprintf(d.Out, "#   %s: (sensitive) set\n", c.Field)
		case c.From == "":
			fmt.Fprintf(d.Out, "#   %s: %s\n", c.Field, c.To)
		case c.To == "":
			fmt.Fprintf(d.Out, "#   %s: %s -> (removed)\n", c.Field, c.From)
		default:
			fmt.Fprintf(d.Out, "#   %s: %s -> %s\n", c.Field, c.From, c.To)
		}
	}
}

// secretMissing reports whether a connection Secret is absent, so the
// resource's next Apply would issue new credentials.
func (d *Differ) secretMissing(ctx context.Context, namespace, name string) (bool, error) {
	err := d.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &corev1.Secret{})
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("reading connection Secret %s/%s: %w", namespace, name, err)
	}
	return false, nil
}
