package reconciler

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// NewStatusClient returns the client the status writer writes with: cfg's,
// with a warning handler that hands the apiserver's warnings on a status
// write to the writer (an unknown field dropped is the parent's problem,
// not a log line) and logs the others, as controller-runtime's client does.
func NewStatusClient(cfg *rest.Config, opts client.Options) (client.Client, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandler = nil
	cfg.WarningHandlerWithContext = warningHandler{fallback: log.NewKubeAPIWarningLogger(log.KubeAPIWarningLoggerOptions{})}
	return client.New(cfg, opts)
}

// warningHandler collects the warnings of a request whose context carries
// a warnings collector, and passes the others on.
type warningHandler struct {
	fallback rest.WarningHandlerWithContext
}

func (h warningHandler) HandleWarningHeaderWithContext(ctx context.Context, code int, agent, message string) {
	if w, ok := ctx.Value(warningsKey{}).(*warnings); ok && code == 299 && message != "" {
		w.add(message)
		return
	}
	h.fallback.HandleWarningHeaderWithContext(ctx, code, agent, message)
}

type warningsKey struct{}

// warnings are the apiserver's warnings on one request.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func collectWarnings(ctx context.Context) (context.Context, *warnings) {
	w := &warnings{}
	return context.WithValue(ctx, warningsKey{}, w), w
}

func (w *warnings) add(msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, msg)
}

// droppedStatusFields returns the status fields the apiserver says it
// dropped (`unknown field "status.availableReplicas"`), sorted, as paths
// below status.
func (w *warnings) droppedStatusFields() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, msg := range w.msgs {
		quoted, ok := strings.CutPrefix(msg, "unknown field ")
		if !ok {
			continue
		}
		path, err := strconv.Unquote(quoted)
		if err != nil {
			continue
		}
		if rest, ok := strings.CutPrefix(path, "status."); ok && !slices.Contains(out, rest) {
			out = append(out, rest)
		}
	}
	slices.Sort(out)
	return out
}

// withoutPaths returns a copy of status without the dotted paths.
func withoutPaths(status map[string]any, paths []string) map[string]any {
	out := deepCopyMap(status)
	for _, p := range paths {
		removePath(out, strings.Split(p, "."))
	}
	return out
}

func removePath(m map[string]any, path []string) {
	if len(path) == 1 {
		delete(m, path[0])
		return
	}
	if sub, ok := m[path[0]].(map[string]any); ok {
		removePath(sub, path[1:])
	}
}

func deepCopyMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok {
			v = deepCopyMap(sub)
		}
		out[k] = v
	}
	return out
}
