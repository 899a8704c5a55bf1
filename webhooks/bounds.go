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
)

// metricWebhookRefused counts the webhook requests refused by Bounds:
// "too-large" (the body), "busy" (no slot in time), "kind-busy" (the
// kind's slots taken).
var metricWebhookRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "engine_webhook_requests_refused_total",
	Help: "Webhook requests refused by the webhook's bounds: too-large (--webhook-max-request-bytes), busy (--webhook-max-in-flight), kind-busy (--webhook-max-per-kind).",
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
	if b.Wait <= 0 {
		b.Wait = 2 * time.Second
	}
	if b.KindWait <= 0 {
		b.KindWait = 10 * time.Second
	}
	return b
}

// gate holds the slots of the port (reading and decoding a request) and
// of each kind (evaluating it). A request gives its port slot back once
// decoded, before it waits for its kind's: requests of a flooded kind wait
// (at most MaxWaiting of them, then 429 at once) without keeping other
// kinds' requests from being read.
type gate struct {
	bounds Bounds
	slots  chan struct{}

	mu    sync.Mutex // guards kinds and each kindSlots.waiting
	kinds map[schema.GroupKind]*kindSlots
}

type kindSlots struct {
	run     chan struct{} // capacity MaxPerKind
	waiting int
}

func newGate(b Bounds) *gate {
	b = b.withDefaults()
	return &gate{bounds: b, slots: make(chan struct{}, b.MaxInFlight), kinds: map[schema.GroupKind]*kindSlots{}}
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
	ctx, cancel := context.WithTimeout(ctx, g.bounds.KindWait)
	defer cancel()
	select {
	case ks.run <- struct{}{}:
		err = nil
	case <-ctx.Done():
		g.refused("kind-busy")
		err = g.busyKind(gk)
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

// busyKind is the error of a request refused for its kind's slots.
func (g *gate) busyKind(gk schema.GroupKind) error {
	return fmt.Errorf("the engine's webhook is busy with %s: %d of its evaluations are running (--webhook-max-per-kind), some perhaps past --evaluation-timeout, and more wait", gk, g.bounds.MaxPerKind)
}

func (g *gate) refused(reason string) {
	metricWebhookRefused.WithLabelValues(reason).Inc()
}
