package diff

import (
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cuengine/engine/render"
)

// leftAlone lists the CreateOnly paths of the desired child obj whose live
// value differs from the template's: the engine leaves them as they are
// (render.KeepingLive), so they are no change, and the diff says so.
func leftAlone(obj, live *unstructured.Unstructured) []string {
	var out []string
	for _, p := range render.CreateOnlyPaths(obj) {
		segs := strings.Split(p, ".")
		want, wok, _ := unstructured.NestedFieldNoCopy(obj.Object, segs...)
		have, hok, _ := unstructured.NestedFieldNoCopy(live.Object, segs...)
		if !wok || hok && fmt.Sprint(want) == fmt.Sprint(have) {
			continue
		}
		out = append(out, fmt.Sprintf("%s left alone (CreateOnly): live %s, template %s", p, show(have, hok), show(want, wok)))
	}
	return out
}

// show is a value as one line of the diff's output.
func show(v any, found bool) string {
	if !found {
		return "(none)"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
