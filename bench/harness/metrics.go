package harness

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"k8s.io/client-go/rest"
)

// counts maps "VERB resource[/subresource]" to a number of requests.
type counts map[string]float64

// minus returns c - o, key by key.
func (c counts) minus(o counts) counts {
	out := counts{}
	for k, v := range c {
		if d := v - o[k]; d != 0 {
			out[k] = d
		}
	}
	for k, v := range o {
		if _, ok := c[k]; !ok {
			out[k] = -v
		}
	}
	return out
}

// clone returns a copy of c.
func (c counts) clone() counts {
	out := make(counts, len(c))
	for k, v := range c {
		out[k] = v
	}
	return out
}

// controllerResources are the resources whose requests are attributed to
// the controller under test; others (leases, the CRDs) are the apiserver's
// own housekeeping.
var controllerResources = map[string]bool{
	"mykinds": true, "mykinds/status": true,
	"deployments": true, "deployments/status": true,
	"events": true,
}

// writeVerbs are the apiserver verbs that change state.
var writeVerbs = map[string]bool{
	"POST": true, "PUT": true, "PATCH": true, "APPLY": true, "DELETE": true, "DELETECOLLECTION": true,
}

// splitKey splits "VERB resource" into its parts.
func splitKey(k string) (verb, resource string) {
	verb, resource, _ = strings.Cut(k, " ")
	return verb, resource
}

// attributable keeps the non-watch requests on the controller's resources.
// Watches are counted by the apiserver only when they end, so they would
// not be comparable.
func (c counts) attributable() counts {
	out := counts{}
	for k, v := range c {
		verb, res := splitKey(k)
		if controllerResources[res] && verb != "WATCH" && v > 0 {
			out[k] = v
		}
	}
	return out
}

// writes sums the write requests.
func (c counts) writes() float64 {
	var n float64
	for k, v := range c {
		if verb, _ := splitKey(k); writeVerbs[verb] {
			n += v
		}
	}
	return n
}

// scrapeAPIServer reads apiserver_request_total from the apiserver's
// /metrics, summed over codes, scopes and versions.
func scrapeAPIServer(ctx context.Context, rc rest.Interface) (counts, error) {
	raw, err := rc.Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading apiserver metrics: %w", err)
	}
	return parseRequestTotals(raw)
}

// requestTotalPrefix starts every sample line of the apiserver's request
// counter.
const requestTotalPrefix = "apiserver_request_total{"

// parseRequestTotals parses apiserver_request_total samples from the
// Prometheus text format.
func parseRequestTotals(raw []byte) (counts, error) {
	out := counts{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, requestTotalPrefix) {
			continue
		}
		end := strings.LastIndexByte(line, '}')
		if end < 0 {
			return nil, fmt.Errorf("malformed metric line %q", line)
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
		if err != nil {
			return nil, fmt.Errorf("malformed metric line %q: %w", line, err)
		}
		labels := parseLabels(line[len(requestTotalPrefix):end])
		out[requestKey(labels["verb"], labels["resource"], labels["subresource"])] += v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading apiserver metrics: %w", err)
	}
	return out, nil
}

// parseLabels parses `a="x",b="y"`, honouring quotes and escapes.
func parseLabels(s string) map[string]string {
	out := map[string]string{}
	for len(s) > 0 {
		eq := strings.IndexByte(s, '=')
		if eq < 0 || eq+1 >= len(s) || s[eq+1] != '"' {
			return out
		}
		name := strings.TrimLeft(s[:eq], ", ")
		var val strings.Builder
		i := eq + 2
		for ; i < len(s) && s[i] != '"'; i++ {
			if s[i] == '\\' && i+1 < len(s) {
				i++
			}
			val.WriteByte(s[i])
		}
		out[name] = val.String()
		if i+1 > len(s) {
			return out
		}
		s = s[i+1:]
	}
	return out
}

// requestKey names a request the way the report shows it.
func requestKey(verb, resource, subresource string) string {
	if subresource != "" {
		resource += "/" + subresource
	}
	return verb + " " + resource
}

// requestCounter counts a client's requests by apiserver verb and resource,
// so the harness's own requests can be told apart from the controller's.
type requestCounter struct {
	mu sync.Mutex
	m  counts
}

// wrap returns a RoundTripper that counts the requests it passes on.
func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		c.add(classify(req))
		return rt.RoundTrip(req)
	})
}

func (c *requestCounter) add(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = counts{}
	}
	c.m[key]++
}

// snapshot returns the counts so far.
func (c *requestCounter) snapshot() counts {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m.clone()
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// classify returns the request's key in the apiserver's own terms: verb
// (GET, LIST, WATCH, POST, PUT, PATCH, APPLY, DELETE) and resource.
func classify(req *http.Request) string {
	resource, sub, named := parseResourcePath(req.URL)
	verb := req.Method
	switch {
	case verb == http.MethodGet && req.URL.Query().Get("watch") == "true":
		verb = "WATCH"
	case verb == http.MethodGet && !named:
		verb = "LIST"
	case verb == http.MethodPatch && strings.HasPrefix(req.Header.Get("Content-Type"), "application/apply-patch"):
		verb = "APPLY"
	case verb == http.MethodDelete && !named:
		verb = "DELETECOLLECTION"
	}
	return requestKey(verb, resource, sub)
}

// parseResourcePath extracts resource, subresource and whether an object is
// named from /api/v1/... and /apis/<group>/<version>/... paths.
func parseResourcePath(u *url.URL) (resource, sub string, named bool) {
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return "", "", false
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	if len(parts) == 0 {
		return "", "", false
	}
	resource = parts[0]
	if len(parts) >= 3 {
		sub = parts[2]
	}
	return resource, sub, len(parts) >= 2
}

// evaluationCounts are the engine's template evaluations so far: every
// call, and those its memory answered.
type evaluationCounts struct {
	total, remembered float64
}

// The engine's evaluation histogram counts every evaluation; the counter,
// those its memory answered.
const (
	evaluationMetric = "engine_template_evaluation_duration_seconds"
	rememberedMetric = "engine_template_evaluations_remembered_total"
)

// scrapeEvaluations reads the engine's evaluation counts from its
// metrics endpoint.
func scrapeEvaluations(ctx context.Context, url string) (evaluationCounts, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return evaluationCounts{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return evaluationCounts{}, fmt.Errorf("reading the engine's metrics: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return evaluationCounts{}, fmt.Errorf("reading the engine's metrics: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return evaluationCounts{}, fmt.Errorf("reading the engine's metrics: %s", resp.Status)
	}
	return parseEvaluations(raw)
}

// parseEvaluations sums the evaluation histogram's count and the
// remembered counter over kinds, from the Prometheus text format.
func parseEvaluations(raw []byte) (evaluationCounts, error) {
	var out evaluationCounts
	seen := false
	for line := range strings.Lines(string(raw)) {
		var sum *float64
		switch {
		case strings.HasPrefix(line, evaluationMetric+"_count"):
			sum, seen = &out.total, true
		case strings.HasPrefix(line, rememberedMetric):
			sum = &out.remembered
		default:
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			return out, fmt.Errorf("malformed metric line %q: %w", strings.TrimSpace(line), err)
		}
		*sum += v
	}
	if !seen {
		return out, fmt.Errorf("the engine's metrics have no %s", evaluationMetric)
	}
	return out, nil
}

// freeAddress returns a loopback address with a port free at the time of
// the call.
func freeAddress() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
