package plugin

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/cuengine/engine/providers"
)

// ExternalName asks the plugin, within ctx's deadline.
func (p *Plugin) ExternalName(ctx context.Context, req providers.Request, attempt int) (string, map[string]string, error) {
	var resp externalNameResponse
	if err := p.call(ctx, methodExternalName, req, attempt, &resp); err != nil {
		return "", nil, err
	}
	if err := errorFromWire(resp.Error); err != nil {
		return "", nil, err
	}
	return resp.Name, resp.Settings, nil
}

// Apply asks the plugin, within ctx's deadline (gRPC carries it to the
// plugin's side).
func (p *Plugin) Apply(ctx context.Context, req providers.Request) (providers.Observation, error) {
	var resp applyResponse
	if err := p.call(ctx, methodApply, req, 0, &resp); err != nil {
		return providers.Observation{}, err
	}
	if err := errorFromWire(resp.Error); err != nil {
		return providers.Observation{}, err
	}
	obs := providers.Observation{Exists: resp.Exists, Ready: resp.Ready, Sensitive: resp.Sensitive}
	if len(resp.State) > 0 {
		if err := utiljson.Unmarshal(resp.State, &obs.State); err != nil {
			return providers.Observation{}, unavailable(p.opts.Name, fmt.Errorf("%s: decoding the observed state: %w", methodApply, err))
		}
	}
	return obs, nil
}

// Delete asks the plugin, within ctx's deadline.
func (p *Plugin) Delete(ctx context.Context, req providers.Request) error {
	var resp deleteResponse
	if err := p.call(ctx, methodDelete, req, 0, &resp); err != nil {
		return err
	}
	return errorFromWire(resp.Error)
}

// Plan asks the plugin, within ctx's deadline. A sensitive change arrives
// without values, whatever the plugin sent.
func (p *Plugin) Plan(ctx context.Context, req providers.Request) (providers.Plan, error) {
	var resp planResponse
	if err := p.call(ctx, methodPlan, req, 0, &resp); err != nil {
		return providers.Plan{}, err
	}
	if err := errorFromWire(resp.Error); err != nil {
		return providers.Plan{}, err
	}
	plan := providers.Plan{Action: providers.Action(resp.Action), Reason: resp.Reason}
	switch plan.Action {
	case providers.ActionNone, providers.ActionUpdate, providers.ActionCreate, providers.ActionRefuse, providers.ActionReplace:
	default:
		return providers.Plan{}, unavailable(p.opts.Name, fmt.Errorf("%s: unknown action %q", methodPlan, resp.Action))
	}
	for _, c := range resp.Changes {
		if c.Sensitive {
			c.From, c.To = "", ""
		}
		plan.Changes = append(plan.Changes, providers.Change(c))
	}
	return plan, nil
}

// call makes one call on the published connection. It fails at once with
// ProviderUnavailable when the plugin is down (no waiting for it), and a
// call cut by the plugin's death fails the same way.
func (p *Plugin) call(ctx context.Context, method string, req providers.Request, attempt int, resp any) error {
	conn, done, err := p.connection(ctx)
	if err != nil {
		return err
	}
	defer done()
	w, err := toWire(req, attempt)
	if err != nil {
		return providers.Terminal(providers.ReasonInvalidSpec, "provider %s: %w", p.opts.Name, err)
	}
	if err := conn.Invoke(ctx, fullMethod(method), w, resp, grpc.WaitForReady(false)); err != nil {
		return transportError(ctx, p.opts.Name, method, err)
	}
	return nil
}
