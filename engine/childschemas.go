package engine

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/openapi"
	"k8s.io/client-go/rest"

	"github.com/cuengine/engine/templates"
)

// Refresh intervals of the cluster's list of OpenAPI documents: every
// pathsMaxAge, and sooner (pathsMissAge) when a template asks for a group
// version the list does not have, so a CRD installed after the engine
// started is checked at the next reload.
const (
	pathsMaxAge  = time.Minute
	pathsMissAge = 5 * time.Second
	fetchTimeout = 10 * time.Second
)

// ClusterSchemas serves the cluster's OpenAPI v3 documents (discovery's
// /openapi/v3) to templates.LoadWith, so children of kinds that are neither
// built in nor the templates' own, such as another operator's CRDs, are
// checked too. Documents are cached by the hash the apiserver puts in their
// URL: a reload asks again only for what changed. It is safe for
// concurrent use; no lock is held while talking to the apiserver.
type ClusterSchemas struct {
	client openapi.ClientWithContext
	now    func() time.Time

	mu      sync.Mutex
	paths   map[string]openapi.GroupVersionWithContext
	pathsAt time.Time
	docs    map[string]cachedDoc // by path
}

type cachedDoc struct {
	url string
	doc []byte
}

var _ templates.SchemaSource = (*ClusterSchemas)(nil)

// NewClusterSchemas returns a ClusterSchemas for the cluster of cfg.
func NewClusterSchemas(cfg *rest.Config) (*ClusterSchemas, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("openapi discovery: %w", err)
	}
	return &ClusterSchemas{client: openapi.ToClientWithContext(dc.OpenAPIV3()), now: time.Now, docs: map[string]cachedDoc{}}, nil
}

// OpenAPIV3 returns the document of gv, nil when the cluster serves none.
func (c *ClusterSchemas) OpenAPIV3(gv schema.GroupVersion) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), fetchTimeout)
	defer cancel()
	path := "apis/" + gv.Group + "/" + gv.Version
	if gv.Group == "" {
		path = "api/" + gv.Version
	}
	c.mu.Lock()
	paths, age := c.paths, c.now().Sub(c.pathsAt)
	c.mu.Unlock()
	if _, ok := paths[path]; paths == nil || age > pathsMaxAge || !ok && age > pathsMissAge {
		fresh, err := c.client.PathsWithContext(ctx)
		if err != nil {
			return nil, fmt.Errorf("openapi discovery: %w", err)
		}
		c.mu.Lock()
		c.paths, c.pathsAt, paths = fresh, c.now(), fresh
		c.mu.Unlock()
	}
	entry, ok := paths[path]
	if !ok {
		return nil, nil
	}
	url := entry.ServerRelativeURL()
	c.mu.Lock()
	cached, ok := c.docs[path]
	c.mu.Unlock()
	if ok && cached.url == url {
		return cached.doc, nil
	}
	doc, err := entry.SchemaWithContext(ctx, "application/json")
	if err != nil {
		return nil, fmt.Errorf("openapi discovery of %s: %w", path, err)
	}
	c.mu.Lock()
	c.docs[path] = cachedDoc{url: url, doc: doc}
	c.mu.Unlock()
	return doc, nil
}
