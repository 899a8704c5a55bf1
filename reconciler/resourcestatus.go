package reconciler

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/providers"
)

// resourceStatus is one entry of status.resources: what the parent shows of
// an external resource. Provider and ExternalName mirror the record on the
// parent; the rest is the provider's last observation, absent until the
// resource has been observed once.
type resourceStatus struct {
	Provider     string
	ExternalName string
	Observed     bool
	Exists       bool
	Ready        bool
	// State is what the template sees as observed.<name>.
	State map[string]any
}

func newResourceStatus(rec resourceRecord, obs *providers.Observation) resourceStatus {
	rs := resourceStatus{Provider: rec.Provider, ExternalName: rec.ExternalName}
	if obs != nil {
		rs.Observed, rs.Exists, rs.Ready, rs.State = true, obs.Exists, obs.Ready, jsonCopy(obs.State)
	}
	return rs
}

// toMap is the entry as stored in status.resources.<name>.
func (rs resourceStatus) toMap() map[string]any {
	m := map[string]any{"provider": rs.Provider, "externalName": rs.ExternalName}
	if rs.Observed {
		m["exists"], m["ready"] = rs.Exists, rs.Ready
		if rs.State != nil {
			m["state"] = rs.State
		}
	}
	return m
}

// resourceStatusFrom reads one stored entry.
func resourceStatusFrom(m map[string]any) resourceStatus {
	rs := resourceStatus{}
	rs.Provider, _ = m["provider"].(string)
	rs.ExternalName, _ = m["externalName"].(string)
	exists, hasExists := m["exists"].(bool)
	rs.Ready, _ = m["ready"].(bool)
	rs.Observed, rs.Exists = hasExists, exists
	rs.State, _ = m["state"].(map[string]any)
	return rs
}

// storedResources reads the parent's status.resources, by name.
func storedResources(parent *unstructured.Unstructured) map[string]resourceStatus {
	res, _, _ := unstructured.NestedMap(parent.Object, "status", contract.StatusResources)
	out := make(map[string]resourceStatus, len(res))
	for name, v := range res {
		if m, ok := v.(map[string]any); ok {
			out[name] = resourceStatusFrom(m)
		}
	}
	return out
}

// waitingResources names the resources that are not ready, sorted.
func waitingResources(resources map[string]resourceStatus) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(resources)) {
		if rs := resources[name]; !rs.Ready {
			out = append(out, fmt.Sprintf("resource %s (%s)", name, rs.ExternalName))
		}
	}
	return out
}

// jsonCopy returns v through JSON, so the status holds only plain values.
func jsonCopy(v map[string]any) map[string]any {
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var out map[string]any
	if err := utiljson.Unmarshal(b, &out); err != nil {
		return nil
	}
	return out
}
