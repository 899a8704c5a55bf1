package webhooks

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/cuengine/engine/render"
)

// metricWebhookRefused counts the webhook requests refused by Bounds:
// "too-large" (the body), "busy" (no slot in time), "kind-busy" (the
// kind's slots taken), "evaluating" (no share of the CPUs in time).
var metricWebhookRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "engine_webhook_requests_refused_total",
	Help: "Webhook requests refused by the webhook's bounds: too-large (--webhook-max-request-bytes), busy (--webhook-max-in-flight), kind-busy (--webhook-max-per-kind), evaluating (--webhook-max-evaluating).",
}, []string{"why"})

func init() { metrics.Registry.MustRegister(metricWebhookRefused) }

// Bounds limit what the webhook port may cost the engine, whoever calls it:
// the apiserver, or anyone else who reaches the port.
type Bounds struct {
	// MaxRequestBytes bounds one request's body. A request that says it
	// is larger (Content-Length) is refused before it is read; one that
	// does not is cut at the bound. Zero: DefaultMaxRequestBytes.
	MaxRequestBytes int64
	// MaxInFlight bounds the requests read and evaluated at once; more
	// wait up to Wait for a slot, then get 429. Zero: GOMAXPROCS, at
	// least 2.
	MaxInFlight int
	// MaxPerKind bounds the evaluations of one kind at once (conversions
	// and validations), so a flood for one kind leaves slots to the
	// others: beyond it a request gets 429 at once. A slot is held until
	// the evaluation ends, also one that ran past --evaluation-timeout.
	// Zero: MaxInFlight, at least 2.
	MaxPerKind int
	// MaxWaiting bounds the requests of one kind waiting for one of its
	// slots; beyond it a request gets 429 at once. The apiserver converts
	// a kind for its watches, lists and gets at once, so a few always
	// wait, one per object of a review. Zero: 64 times MaxPerKind.
	MaxWaiting int
	// MaxEvaluating bounds the objects evaluated at once in the engine's
	// own process over every kind, so that webhook requests, however
	// many, leave the rest of its CPUs to its reconciles. With evaluator
	// processes, conversions and validations go there (at a lower CPU
	// priority) and evaluate in the engine only when no process is free
	// at once. An object takes a share for its evaluation and gives it
	// back when its evaluation returns (at --evaluation-timeout for one
	// that runs past it; its kind's slot is held to its end). Shares are
	// taken in the order asked. Zero: half of GOMAXPROCS, at least 1.
	MaxEvaluating int
	// Wait is how long a request waits for a port slot, KindWait how long
	// an object of a review waits for its kind's. Zero: 2s and 10s (the
	// apiserver waits 30s for a conversion).
	Wait, KindWait time.Duration
}

// DefaultMaxRequestBytes fits what the apiserver sends: one object of a
// write (the apiserver takes request bodies of at most 3 MiB, and etcd
// stores values of at most 1.5 MiB by default), or a list page to convert
// (500 objects, client-go's page, of 64 KiB each).
const DefaultMaxRequestBytes = 32 << 20

func (b Bounds) withDefaults() Bounds {
	if b.MaxRequestBytes <= 0 {
		b.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if b.MaxInFlight <= 0 {
		b.MaxInFlight = max(2, runtime.GOMAXPROCS(0))
	}
	if b.MaxPerKind <= 0 {
		b.MaxPerKind = max(2, b.MaxInFlight)
	}
	if b.MaxWaiting <= 0 {
		b.MaxWaiting = 64 * b.MaxPerKind
	}
	if b.MaxEvaluating <= 0 {
		b.MaxEvaluating = max(1, runtime.GOMAXPROCS(0)/2)
	}
	if b.Wait <= 0 {
		b.Wait = 2 * time.Second
	}
	if b.KindWait <= 0 {
		b.KindWait = 10 * time.Second
	}
	return b
}

// gate holds the slots of the port (reading and decoding a request), of
// each kind (evaluating it), and the shares of the CPUs its evaluations
// take. A request gives its port slot back once
// decoded, before it waits for its kind's: requests of a flooded kind wait
// (at most MaxWaiting of them, then 429 at once) without keeping other
// kinds' requests from being read.
type gate struct {
	bounds Bounds
	slots  chan struct{}
	shares chan struct{} // capacity MaxEvaluating

	mu    sync.Mutex // guards kinds and each kindSlots.waiting
	kinds map[schema.GroupKind]*kindSlots
}

type kindSlots struct {
	run     chan struct{} // capacity MaxPerKind
	waiting int
}

func newGate(b Bounds) *gate {
	b = b.withDefaults()
	return &gate{bounds: b, slots: make(chan struct{}, b.MaxInFlight), shares: make(chan struct{}, b.MaxEvaluating), kinds: map[schema.GroupKind]*kindSlots{}}
}

type portSlotKey struct{}

// wrap bounds h: the body's size, and the requests read at once. h gives
// the port slot back early with releasePort once it has decoded the body.
func (g *gate) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > g.bounds.MaxRequestBytes {
			g.refused("too-large")
			http.Error(w, fmt.Sprintf("the request is %d bytes, more than the %d the engine reads (--webhook-max-request-bytes)", r.ContentLength, g.bounds.MaxRequestBytes), http.StatusRequestEntityTooLarge)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, g.bounds.MaxRequestBytes)
		ctx, cancel := context.WithTimeout(r.Context(), g.bounds.Wait)
		defer cancel()
		select {
		case g.slots <- struct{}{}:
		case <-ctx.Done():
			g.refused("busy")
			w.Header().Set("Retry-After", "1")
			http.Error(w, fmt.Sprintf("the engine's webhook is busy: %d requests are being read (--webhook-max-in-flight)", g.bounds.MaxInFlight), http.StatusTooManyRequests)
			return
		}
		var once sync.Once
		release := func() { once.Do(func() { <-g.slots }) }
		defer release()
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), portSlotKey{}, release)))
	})
}

// releasePort gives back the port slot of the request of ctx, if any.
func releasePort(ctx context.Context) {
	if release, ok := ctx.Value(portSlotKey{}).(func()); ok {
		release()
	}
}

// kind takes an evaluation slot of gk, waiting up to Wait; an error says
// why not. release gives it back (once; later calls do nothing): the
// caller hands it to the evaluation, which calls it when its CUE work
// ends, past the timeout too.
func (g *gate) kind(ctx context.Context, gk schema.GroupKind) (release func(), err error) {
	g.mu.Lock()
	ks := g.kinds[gk]
	if ks == nil {
		ks = &kindSlots{run: make(chan struct{}, g.bounds.MaxPerKind)}
		g.kinds[gk] = ks
	}
	if ks.waiting >= g.bounds.MaxWaiting {
		g.mu.Unlock()
		g.refused("kind-busy")
		return nil, g.busyKind(gk)
	}
	ks.waiting++
	g.mu.Unlock()
	wait, cancel := context.WithTimeout(ctx, g.bounds.KindWait)
	defer cancel()
	select {
	case ks.run <- struct{}{}:
		err = nil
	case <-wait.Done():
		if err = ctx.Err(); err == nil { // not the caller gone: the wait ran out
			g.refused("kind-busy")
			err = g.busyKind(gk)
		}
	}
	g.mu.Lock()
	ks.waiting--
	g.mu.Unlock()
	if err != nil {
		return nil, err
	}
	var once sync.Once
	return func() { once.Do(func() { <-ks.run }) }, nil
}

// share takes one of the CPUs' shares for an object's evaluation, waiting
// up to KindWait behind the objects that asked before (a channel's
// waiting senders are served in order); release gives it back (once).
func (g *gate) share(ctx context.Context) (release func(), err error) {
	wait, cancel := context.WithTimeout(ctx, g.bounds.KindWait)
	defer cancel()
	select {
	case g.shares <- struct{}{}:
	case <-wait.Done():
		if ctx.Err() != nil {
			return nil, ctx.Err() // the caller gone
		}
		g.refused("evaluating")
		return nil, &busyError{fmt.Sprintf("the engine's webhook is busy: %d evaluations are running, the most it runs at once (--webhook-max-evaluating), and others wait", g.bounds.MaxEvaluating)}
	}
	var once sync.Once
	return func() { once.Do(func() { <-g.shares }) }, nil
}

// shareOf is share for render: the shares of the request of ctx.
func (g *gate) shareOf(ctx context.Context) render.Share {
	return func() (func(), error) { return g.share(ctx) }
}

// busyKind is the error of a request refused for its kind's slots.
func (g *gate) busyKind(gk schema.GroupKind) error {
	return &busyError{fmt.Sprintf("the engine's webhook is busy with %s: %d of its evaluations are running (--webhook-max-per-kind), some perhaps past --evaluation-timeout, and more wait", gk, g.bounds.MaxPerKind)}
}

// busyError is a request refused for the engine's room, not for itself.
type busyError struct{ msg string }

func (e *busyError) Error() string { return e.msg }

func (g *gate) refused(reason string) {
	metricWebhookRefused.WithLabelValues(reason).Inc()
}
