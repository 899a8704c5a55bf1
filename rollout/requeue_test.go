package rollout

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/cuengine/engine/render"
	"github.com/cuengine/engine/revisions"
	"github.com/cuengine/engine/templates"
)

// requeueKind is a kind whose RequeueAll runs until its context ends, and
// then until its release is closed (release[i] for the i-th call): a
// fleet-wide requeue of a large fleet.
type requeueKind struct {
	fakeKind
	release [2]chan struct{}

	mu       sync.Mutex
	calls    int
	running  int
	overlap  int
	started  chan struct{} // one send per call
	canceled chan struct{} // one send per call whose context ended
}

func (k *requeueKind) RequeueAll(ctx context.Context) {
	k.mu.Lock()
	release := k.release[k.calls]
	k.calls++
	k.running++
	if k.running > 1 {
		k.overlap++
	}
	k.mu.Unlock()
	defer func() {
		k.mu.Lock()
		k.running--
		k.mu.Unlock()
	}()
	k.started <- struct{}{}
	<-ctx.Done()
	k.canceled <- struct{}{}
	<-release
}

func (k *requeueKind) state() (calls, running, overlap int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.calls, k.running, k.overlap
}

// immediateTemplate compiles a Shelf template rolled out at once.
func immediateTemplate(t *testing.T, note string) *templates.Template {
	t.Helper()
	dir := t.TempDir()
	src := `parent: {apiVersion: "shelf.cuengine.dev/v1", kind: "Shelf"}
rollout: strategy: "Immediate"
children: books: {
	apiVersion: "v1"
	kind:       "ConfigMap"
	metadata: name: parent.metadata.name
	data: note: "` + note + `"
}
`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "shelf.cue"), []byte(src), 0o644))
	set, err := templates.Load(dir)
	require.NoError(t, err)
	return set.Templates()[0]
}

// TestRolloutRequeuesOneAtATime: each completed revision requeues the
// fleet; a new requeue cancels the running one and starts once it has
// returned, and Run returns only after the last one has.
func TestRolloutRequeuesOneAtATime(t *testing.T) {
	scheme := runtime.NewScheme()
	require.NoError(t, appsv1.AddToScheme(scheme))
	c := fake.NewClientBuilder().WithScheme(scheme).Build()
	v1 := immediateTemplate(t, "one")
	k := &requeueKind{release: [2]chan struct{}{make(chan struct{}), make(chan struct{})}, started: make(chan struct{}, 8), canceled: make(chan struct{}, 8)}
	k.tpl, k.sentTo = v1, map[string]int64{}
	store := &revisions.Store{Client: c, Reader: c, Namespace: "default", GVK: v1.GVK}
	k.ro = New(k, v1.GVK, store, 10, Hold{Limits: render.Limits{EvaluationTimeout: time.Second}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, k.ro.Init(ctx))

	runCtx, stop := context.WithCancel(ctx)
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		k.ro.Run(runCtx)
	}()
	var closeOnce [2]sync.Once
	release := func(i int) { closeOnce[i].Do(func() { close(k.release[i]) }) }
	defer func() {
		release(0)
		release(1)
		stop()
		<-returned
	}()

	wait := func(ch chan struct{}, what string) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: not within 20s", what)
		}
	}
	newRevision := func(note string) {
		tpl := immediateTemplate(t, note)
		k.fakeKind.mu.Lock()
		k.tpl = tpl
		k.fakeKind.mu.Unlock()
		k.ro.Poke()
	}

	newRevision("two")
	wait(k.started, "revision 2 requeues the fleet")
	newRevision("three")
	wait(k.canceled, "revision 3 cancels revision 2's requeue")
	// Revision 3's requeue starts once revision 2's has returned, which
	// it does when released.
	select {
	case <-k.started:
		t.Fatal("revision 3's requeue started while revision 2's ran")
	case <-time.After(200 * time.Millisecond):
	}
	release(0)
	wait(k.started, "revision 3 requeues the fleet")
	calls, _, overlap := k.state()
	assert.Equal(t, 2, calls)
	assert.Zero(t, overlap, "two fleet-wide requeues ran at once")

	// Run's end cancels the last requeue and waits for it.
	stop()
	wait(k.canceled, "the end of Run cancels the requeue")
	select {
	case <-returned:
		t.Fatal("Run returned while its requeue ran")
	case <-time.After(200 * time.Millisecond):
	}
	release(1)
	wait(returned, "Run returns once its requeue has")
	_, running, _ := k.state()
	assert.Zero(t, running)
}
