package evaluator

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/cuengine/engine/templates"
)

// keptTemplates bounds the compiled templates a process keeps: the
// revisions in use at once are few (the newest, and those a rollout pins).
const keptTemplates = 16

// Serve is an evaluator process's loop (`engine evaluator`): it reads
// requests from in and writes one response each to out, until in ends.
// It evaluates one request at a time; the pool kills the process to end
// one that takes too long or holds too much.
func Serve(in io.Reader, out io.Writer) error {
	yieldCPU()
	dec := json.NewDecoder(bufio.NewReaderSize(in, 1<<16))
	w := bufio.NewWriterSize(out, 1<<16)
	enc := json.NewEncoder(w)
	kept := map[string]*templates.Template{}
	var order []string
	for {
		var req request
		if err := dec.Decode(&req); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("reading a request: %w", err)
		}
		t := kept[req.Hash]
		var resp *response
		if t == nil && req.Files == nil {
			resp = &response{Error: &wireError{Message: "evaluator: template " + req.Path + " (" + req.Hash + ") was not sent"}}
		} else {
			if t == nil {
				var err error
				if t, err = templates.Restore(req.Path, req.Files); err != nil {
					resp = &response{Error: errorToWire(err)}
				} else {
					kept[req.Hash] = t
					order = append(order, req.Hash)
					if len(order) > keptTemplates {
						delete(kept, order[0])
						order = order[1:]
					}
				}
			}
			if resp == nil && req.Op == opLoad {
				resp = &response{}
			}
			if resp == nil && req.Objects != nil {
				// A batch: one response per object, each sent as it is
				// done (the engine times each), until one fails.
				for _, obj := range req.Objects {
					resp = handle(t, &request{Op: req.Op, Parent: obj, To: req.To})
					if err := send(enc, w, resp); err != nil {
						return err
					}
					if resp.Error != nil {
						break
					}
				}
				continue
			}
			if resp == nil {
				resp = handle(t, &req)
			}
		}
		if err := send(enc, w, resp); err != nil {
			return err
		}
	}
}

// send writes resp and flushes it.
func send(enc *json.Encoder, w *bufio.Writer, resp *response) error {
	if err := enc.Encode(resp); err != nil {
		return fmt.Errorf("writing a response: %w", err)
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("writing a response: %w", err)
	}
	return nil
}

// handle runs one request on t.
func handle(t *templates.Template, req *request) *response {
	parent := map[string]any{}
	if err := utiljson.Unmarshal(req.Parent, &parent); err != nil {
		return &response{Error: &wireError{Message: "evaluator: decoding the object: " + err.Error()}}
	}
	obj := &unstructured.Unstructured{Object: parent}
	switch req.Op {
	case opEvaluate:
		var observed map[string]any
		if len(req.Observed) > 0 {
			if err := utiljson.Unmarshal(req.Observed, &observed); err != nil {
				return &response{Error: &wireError{Message: "evaluator: decoding the observed state: " + err.Error()}}
			}
		}
		res, err := t.Evaluate(templates.Input{Parent: obj, Observed: observed})
		if err != nil {
			return &response{Error: errorToWire(err)}
		}
		w, err := resultToWire(res)
		if err != nil {
			return &response{Error: &wireError{Message: "evaluator: encoding the result: " + err.Error()}}
		}
		return &response{Result: w}
	case opConvert:
		out, err := t.Convert(obj, req.To)
		if err != nil {
			return &response{Error: errorToWire(err)}
		}
		raw, err := json.Marshal(out.Object)
		if err != nil {
			return &response{Error: &wireError{Message: "evaluator: encoding the object: " + err.Error()}}
		}
		return &response{Object: raw}
	case opValidate:
		return &response{Error: errorToWire(t.ValidateParent(obj))}
	}
	return &response{Error: &wireError{Message: "evaluator: unknown operation " + req.Op}}
}
