package templates

// Document is the resource as `engine render`, `engine test` and `engine
// diff` show it: its provider, spec and deletionPolicy; dependsOn, the
// local names it depends on (explicit or read, Graph), when there are any;
// and connectionSecret: {name}, when it has one. The spec is the
// resource's own, not a copy.
func (r Resource) Document() map[string]any {
	doc := map[string]any{"provider": r.Provider, "spec": r.Spec, "deletionPolicy": r.DeletionPolicy}
	if len(r.DependsOn) > 0 {
		doc["dependsOn"] = r.DependsOn
	}
	if r.ConnectionSecret != "" {
		doc[fieldConnectionSecret] = map[string]any{"name": r.ConnectionSecret}
	}
	return doc
}
