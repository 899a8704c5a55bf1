package main

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cuengine/engine/templates"
)

// caseInHub is a case's parent in the template's hub version: as given
// when it is in the hub, converted by the template's CUE when it is in
// another version the template declares. Anything else is the case's
// failure.
func caseInHub(t *templates.Template, parent *unstructured.Unstructured, rel string) (*unstructured.Unstructured, string) {
	gvk := parent.GroupVersionKind()
	if gvk == t.GVK {
		return parent, ""
	}
	if gvk.GroupKind() != t.GVK.GroupKind() || !declares(t, gvk.Version) {
		return nil, fmt.Sprintf("%s: a %s, but template %s is for %s", rel,
			gvk.Kind+" ("+parent.GetAPIVersion()+")", t.Path, t.GVK.Kind+" ("+versionsOf(t)+")")
	}
	hub, err := t.Convert(parent, t.GVK.Version)
	if err != nil {
		return nil, fmt.Sprintf("%s: %v", rel, err)
	}
	return hub, ""
}

func declares(t *templates.Template, version string) bool {
	for _, v := range t.Versions() {
		if v.Name == version {
			return true
		}
	}
	return false
}

// versionsOf is the kind's group and versions: "apps.example.com/v2, v1".
func versionsOf(t *templates.Template) string {
	var names []string
	for _, v := range t.Versions() {
		names = append(names, v.Name)
	}
	return t.GVK.Group + "/" + strings.Join(names, ", ")
}

// checkConverted compares a case's converted.yaml, the parent in another
// version, with what the template's conversion makes of parent.yaml: the
// spec, and the status when the file gives one.
func checkConverted(t *templates.Template, parent *unstructured.Unstructured, path, rel string) string {
	objs, err := readObjects(path, nil)
	if err != nil {
		return err.Error()
	}
	if len(objs) != 1 {
		return fmt.Sprintf("%s: want one custom resource, found %d", rel, len(objs))
	}
	want := objs[0]
	gvk := want.GroupVersionKind()
	if gvk.GroupKind() != t.GVK.GroupKind() || !declares(t, gvk.Version) {
		return fmt.Sprintf("%s: a %s, but template %s is for %s", rel, gvk.Kind+" ("+want.GetAPIVersion()+")", t.Path, t.GVK.Kind+" ("+versionsOf(t)+")")
	}
	got, err := t.Convert(parent, gvk.Version)
	if err != nil {
		return fmt.Sprintf("%s: %v", rel, err)
	}
	var diffs []string
	for _, top := range []string{"spec", "status"} {
		w, ok := want.Object[top]
		if !ok && top == "status" {
			continue
		}
		if g := got.Object[top]; !reflect.DeepEqual(w, g) {
			diffs = append(diffs, fmt.Sprintf("%s: want %s, the conversion gives %s", top, jsonLine(w), jsonLine(g)))
		}
	}
	if len(diffs) == 0 {
		return ""
	}
	return fmt.Sprintf("%s: %s converted to %s differs:\n  %s", rel, parent.GetAPIVersion(), gvk.Version, strings.Join(diffs, "\n  "))
}

// vetRoundTrips converts the parents of every test case of the templates
// with several versions to the hub and from it to every other version and
// back (templates.Template.RoundTrips), and prints each field lost on the
// way at the conversion that loses it, naming the example. It returns the
// number of problems.
func vetRoundTrips(set *templates.Set, stderr io.Writer) (int, error) {
	cases, _, err := discoverCases(set)
	if err != nil {
		return 0, err
	}
	byName := map[string]*templates.Template{}
	for _, t := range set.Templates() {
		byName[t.Name] = t
	}
	n := 0
	for _, c := range cases {
		t := byName[c.template]
		if t == nil || !t.Converts() {
			continue
		}
		for _, name := range []string{caseParent, caseConverted} {
			path := filepath.Join(c.dir, name)
			if !exists(path) {
				continue
			}
			rel := relTo(set.Root, path)
			objs, err := readObjects(path, nil)
			if err != nil {
				return n, err
			}
			for _, obj := range objs {
				if gv, err := schema.ParseGroupVersion(obj.GetAPIVersion()); err != nil || gv.Group != t.GVK.Group || obj.GetKind() != t.GVK.Kind || !declares(t, gv.Version) {
					continue // engine test reports it
				}
				problems, err := t.RoundTrips(obj)
				if err != nil {
					fmt.Fprintf(stderr, "%s: %v\n", rel, err)
					n++
					continue
				}
				for _, p := range problems {
					fmt.Fprintf(stderr, "%s (example %s)\n", p, rel)
					n++
				}
			}
		}
	}
	return n, nil
}

// jsonLine is a value as JSON on one line.
func jsonLine(v any) string {
	if v == nil {
		return "nothing"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
