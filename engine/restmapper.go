package engine

import (
	"net/http"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// NewRESTMapper is the manager's REST mapper (ctrl.Options.MapperProvider):
// controller-runtime's dynamic mapper, with the mappings it answered
// remembered. Every child and every status write asks for a kind's
// mapping (the scope of each desired child; the metadata client's
// resource for each status patch), and the dynamic mapper answers each
// question by searching every API group it knows, with several KiB of
// garbage a question: 5% of what the engine allocated in a benchmark run.
func NewRESTMapper(cfg *rest.Config, httpClient *http.Client) (meta.RESTMapper, error) {
	m, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	return &rememberingMapper{RESTMapper: m, mappings: map[mappingKey]meta.RESTMapping{}}, nil
}

// rememberingMapper answers RESTMapping from the answers it was given
// before. The dynamic mapper under it never forgets a mapping either: it
// learns a group again only when a question about the group finds no
// match. So a question that fails makes this mapper forget the group's
// mappings too, and ask the mapper under it again.
type rememberingMapper struct {
	meta.RESTMapper

	mu       sync.RWMutex
	mappings map[mappingKey]meta.RESTMapping
}

type mappingKey struct {
	gk       schema.GroupKind
	versions string
}

// RESTMapping implements meta.RESTMapper. The mapping returned is the
// caller's own copy.
func (m *rememberingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	key := mappingKey{gk, strings.Join(versions, ",")}
	m.mu.RLock()
	mapping, ok := m.mappings[key]
	m.mu.RUnlock()
	if ok {
		return &mapping, nil
	}
	got, err := m.RESTMapper.RESTMapping(gk, versions...)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		for k := range m.mappings {
			if k.gk.Group == gk.Group {
				delete(m.mappings, k)
			}
		}
		return nil, err
	}
	m.mappings[key] = *got
	return got, nil
}
