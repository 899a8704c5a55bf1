package evaluator

import (
	"bytes"
	"encoding/json"
	"errors"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/cuengine/engine/templates"
)

// The wire: one JSON request per line on the process's standard input,
// one JSON response per line on its standard output, in turn. A process
// evaluates one request at a time, so a kill ends that request and no
// other.

// Operations of a request.
const (
	opEvaluate = "evaluate"
	opConvert  = "convert"
	opValidate = "validate"
	// opLoad compiles the template sent (Files) and answers nothing else.
	opLoad = "load"
)

type request struct {
	Op string `json:"op"`
	// Path and Hash name the template; Files are its sources
	// (templates.Template.Files), sent with opLoad, once per process.
	Path  string            `json:"path"`
	Hash  string            `json:"hash"`
	Files map[string]string `json:"files,omitempty"`

	// Parent and Observed are JSON, decoded by utiljson (integers as
	// int64) as the engine's objects are.
	Parent   json.RawMessage `json:"parent"`
	Observed json.RawMessage `json:"observed,omitempty"`
	// To is a conversion's version; Objects, in place of Parent, the
	// objects it converts, one response each, in turn, until one fails.
	To      string            `json:"to,omitempty"`
	Objects []json.RawMessage `json:"objects,omitempty"`
}

type response struct {
	Result *wireResult `json:"result,omitempty"`
	// Object is a conversion's result.
	Object json.RawMessage `json:"object,omitempty"`
	Error  *wireError      `json:"error,omitempty"`
}

// wireError is an error of the evaluation: a *templates.Error keeps its
// problems (file:line, CUE path) across the wire; another error its text.
type wireError struct {
	// From and To: a *templates.ConversionError's.
	From     string              `json:"from,omitempty"`
	To       string              `json:"to,omitempty"`
	Template string              `json:"template,omitempty"`
	Problems []templates.Problem `json:"problems,omitempty"`
	Message  string              `json:"message,omitempty"`
}

func errorToWire(err error) *wireError {
	if err == nil {
		return nil
	}
	var te *templates.Error
	if errors.As(err, &te) && te.Error() == err.Error() && len(te.Problems) > 0 {
		return &wireError{Template: te.Template, Problems: te.Problems}
	}
	var ce *templates.ConversionError
	if errors.As(err, &ce) && ce.Error() == err.Error() && len(ce.Problems) > 0 {
		return &wireError{From: ce.From, To: ce.To, Problems: ce.Problems}
	}
	return &wireError{Message: err.Error()}
}

func (w *wireError) err() error {
	if w == nil {
		return nil
	}
	if len(w.Problems) > 0 && w.To != "" {
		return &templates.ConversionError{From: w.From, To: w.To, Problems: w.Problems}
	}
	if len(w.Problems) > 0 {
		return &templates.Error{Template: w.Template, Problems: w.Problems}
	}
	return errors.New(w.Message)
}

type wireResult struct {
	Children     []wireChild          `json:"children,omitempty"`
	Resources    []templates.Resource `json:"resources,omitempty"`
	Status       json.RawMessage      `json:"status,omitempty"`
	Ready        *bool                `json:"ready,omitempty"`
	ReadyReason  string               `json:"readyReason,omitempty"`
	ReadyMessage string               `json:"readyMessage,omitempty"`
	Pruned       []string             `json:"pruned,omitempty"`
	Size         int                  `json:"size"`
	Remembered   bool                 `json:"remembered,omitempty"`
}

type wireChild struct {
	Name      string                    `json:"name"`
	Object    json.RawMessage           `json:"object"`
	DependsOn []string                  `json:"dependsOn,omitempty"`
	ReadyWhen *templates.ChildReadiness `json:"readyWhen,omitempty"`
	Ownership map[string]string         `json:"ownership,omitempty"`
	Cluster   string                    `json:"cluster,omitempty"`
}

func resultToWire(r *templates.Result) (*wireResult, error) {
	w := &wireResult{Resources: r.Resources, Ready: r.Ready, ReadyReason: r.ReadyReason, ReadyMessage: r.ReadyMessage, Pruned: r.Pruned, Size: r.Size, Remembered: r.Remembered}
	for _, c := range r.Children {
		raw, err := json.Marshal(c.Object.Object)
		if err != nil {
			return nil, err
		}
		w.Children = append(w.Children, wireChild{Name: c.Name, Object: raw, DependsOn: c.DependsOn, ReadyWhen: c.ReadyWhen, Ownership: c.Ownership, Cluster: c.Cluster})
	}
	if r.Status != nil {
		raw, err := json.Marshal(r.Status)
		if err != nil {
			return nil, err
		}
		w.Status = raw
	}
	return w, nil
}

// result decodes as the template's own memory does (utiljson: integers
// as int64), so that a Result from a process equals one from in-process.
func (w *wireResult) result() (*templates.Result, error) {
	r := &templates.Result{Ready: w.Ready, ReadyReason: w.ReadyReason, ReadyMessage: w.ReadyMessage, Pruned: w.Pruned, Size: w.Size, Remembered: w.Remembered}
	for _, c := range w.Children {
		obj := map[string]any{}
		if err := utiljson.Unmarshal(c.Object, &obj); err != nil {
			return nil, err
		}
		r.Children = append(r.Children, templates.Child{Name: c.Name, Object: &unstructured.Unstructured{Object: obj}, DependsOn: c.DependsOn, ReadyWhen: c.ReadyWhen, Ownership: c.Ownership, Cluster: c.Cluster})
	}
	for _, rs := range w.Resources {
		spec, err := renumber(rs.Spec)
		if err != nil {
			return nil, err
		}
		rs.Spec = spec
		r.Resources = append(r.Resources, rs)
	}
	if len(w.Status) > 0 && !bytes.Equal(w.Status, []byte("null")) {
		if err := utiljson.Unmarshal(w.Status, &r.Status); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// renumber gives m's numbers the types utiljson decodes them to.
func renumber(m map[string]any) (map[string]any, error) {
	if m == nil {
		return nil, nil
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	return out, utiljson.Unmarshal(raw, &out)
}
