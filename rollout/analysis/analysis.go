package analysis

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/cuengine/engine/templates/policy"
)

// Vars are the values a query may name: {{kind}}, {{revision}} and
// {{wave}} (1-based).
type Vars struct {
	Kind     string
	Revision string
	Wave     int
}

// Verdict is a check's outcome.
type Verdict string

const (
	Passed Verdict = "Passed"
	Failed Verdict = "Failed"
	// Held: no answer to judge by (the server is down, the query failed
	// or returned no data); the wave waits.
	Held Verdict = "Held"
)

// Result is one evaluation of a check.
type Result struct {
	Check   string
	Verdict Verdict
	// Value is the value judged (for a vector, the first that broke the
	// condition, or the first series); NaN when Held.
	Value float64
	// Message says what was judged and why, for status and events.
	Message string
	At      time.Time
}

// Expand replaces the variables a query names, each as the text of a
// PromQL double-quoted string's content (backslashes and quotes escaped).
func Expand(query string, v Vars) string {
	esc := func(s string) string { return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s) }
	return strings.NewReplacer(
		"{{kind}}", esc(v.Kind),
		"{{revision}}", esc(v.Revision),
		"{{wave}}", strconv.Itoa(v.Wave),
	).Replace(query)
}

// Server is a Prometheus server's query API.
type Server struct {
	api     promv1.API
	address string
	timeout time.Duration
}

// Credentials authenticate to the server: a bearer token, or a user and
// password; empty: none.
type Credentials struct {
	Token              string
	Username, Password string
}

// NewServer returns the query API at address ("http://prometheus:9090");
// each query is bounded by timeout (default 10s).
func NewServer(address string, creds Credentials, timeout time.Duration) (*Server, error) {
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	var rt http.RoundTripper = api.DefaultRoundTripper
	if creds != (Credentials{}) {
		rt = authenticated{next: rt, creds: creds}
	}
	c, err := api.NewClient(api.Config{Address: address, RoundTripper: rt})
	if err != nil {
		return nil, fmt.Errorf("prometheus address %q: %w", address, err)
	}
	return &Server{api: promv1.NewAPI(c), address: address, timeout: timeout}, nil
}

// authenticated adds the credentials to every request.
type authenticated struct {
	next  http.RoundTripper
	creds Credentials
}

func (a authenticated) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if a.creds.Token != "" {
		r.Header.Set("Authorization", "Bearer "+a.creds.Token)
	} else {
		r.SetBasicAuth(a.creds.Username, a.creds.Password)
	}
	return a.next.RoundTrip(r)
}

// Evaluate runs c for v now and judges its value.
func (s *Server) Evaluate(ctx context.Context, c policy.AnalysisCheck, v Vars) Result {
	now := time.Now()
	res := Result{Check: c.Name, Value: math.NaN(), At: now}
	cond := c.Condition
	query := Expand(c.Query, v)
	qctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	value, _, _, err := s.api.Query(qctx, query, now)
	if err != nil {
		res.Verdict = Held
		res.Message = fmt.Sprintf("analysis %s held: Prometheus at %s did not answer the query %s: %s", c.Name, s.address, query, queryError(err))
		return res
	}
	return judge(res, c.Name, query, cond, value)
}

// queryError says what went wrong without the URL's credentials (the
// client's errors carry the request URL, never its headers).
func queryError(err error) string {
	var pe *promv1.Error
	if errors.As(err, &pe) {
		return string(pe.Type) + ": " + pe.Msg
	}
	return err.Error()
}

// judge applies cond to a query's value: a scalar, or every series of a
// vector; no data is Held.
func judge(res Result, name, query string, cond policy.Condition, value model.Value) Result {
	type sample struct {
		labels string
		v      float64
	}
	var samples []sample
	switch v := value.(type) {
	case *model.Scalar:
		samples = append(samples, sample{v: float64(v.Value)})
	case model.Vector:
		for _, s := range v {
			samples = append(samples, sample{labels: s.Metric.String(), v: float64(s.Value)})
		}
		sort.Slice(samples, func(i, j int) bool { return samples[i].labels < samples[j].labels })
	default:
		res.Verdict = Held
		res.Message = fmt.Sprintf("analysis %s held: the query %s returned a %s; it must return a scalar or an instant vector", name, query, value.Type())
		return res
	}
	if len(samples) == 0 {
		res.Verdict = Held
		res.Message = fmt.Sprintf("analysis %s held: the query %s returned no data (no data is not success)", name, query)
		return res
	}
	for _, s := range samples {
		if !cond.Holds(s.v) {
			res.Verdict, res.Value = Failed, s.v
			series := ""
			if s.labels != "" && s.labels != "{}" {
				series = " for " + s.labels
			}
			res.Message = fmt.Sprintf("analysis %s failed: %s is %s%s, the condition is %s", name, query, format(s.v), series, cond)
			return res
		}
	}
	res.Verdict, res.Value = Passed, samples[0].v
	res.Message = fmt.Sprintf("analysis %s passed: %s is %s, the condition is %s", name, query, format(samples[0].v), cond)
	return res
}

func format(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }
