package contract

import (
	"encoding/json"
	"fmt"
	"strings"
)

// ResourceRecord is what a parent's AnnotationResourcePrefix+name
// annotation says of one external resource: written before the resource
// is first created, read by the reconcile, the deletion and `engine diff`.
type ResourceRecord struct {
	// Name is the resource's local name (the annotation's suffix).
	Name           string            `json:"-"`
	Provider       string            `json:"provider"`
	ExternalName   string            `json:"externalName"`
	Attempt        int               `json:"attempt,omitempty"`
	Settings       map[string]string `json:"settings,omitempty"`
	DeletionPolicy string            `json:"deletionPolicy"`
	// DependsOn are the local names the resource depends on: they are
	// deleted only after it.
	DependsOn []string `json:"dependsOn,omitempty"`
}

// ResourceRecords reads every resource record of a parent's annotations,
// by local name; an annotation that is not a record is an error naming it.
func ResourceRecords(annotations map[string]string) (map[string]ResourceRecord, error) {
	out := map[string]ResourceRecord{}
	for k, v := range annotations {
		name, ok := strings.CutPrefix(k, AnnotationResourcePrefix)
		if !ok {
			continue
		}
		var rec ResourceRecord
		if err := json.Unmarshal([]byte(v), &rec); err != nil {
			return nil, fmt.Errorf("annotation %s is not a resource record (edited by hand?): %w", k, err)
		}
		rec.Name = name
		out[name] = rec
	}
	return out, nil
}
