package reconciler

// templateStatus is what the template's status block rendered for the
// parent: the fields the template author owns in the parent's status. When
// the template could not be evaluated it is unset, and the fields already
// stored are kept rather than wiped.
type templateStatus struct {
	fields map[string]any
	set    bool
}

func (t *templateStatus) record(fields map[string]any) {
	t.fields, t.set = fields, true
}

// merge copies the template's fields into next, or the stored ones when
// the template did not render this time.
func (t templateStatus) merge(next, stored map[string]any) {
	from := stored
	if t.set {
		from = t.fields
	}
	for k, v := range from {
		next[k] = v
	}
}
