package engine

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFollowUpRetries: a change retries at once and, while the retry
// still finds refused parents, again after each wait; a retry that finds
// none ends the follow-ups, and a change starts them over.
func TestFollowUpRetries(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	changed := make(chan struct{}, 1)
	calls := make(chan int, 100)
	var mu sync.Mutex
	refusedLeft := 3 // the first three retries still find a refused parent
	retry := func() int {
		mu.Lock()
		defer mu.Unlock()
		calls <- refusedLeft
		if refusedLeft > 0 {
			refusedLeft--
			return 1
		}
		return 0
	}
	var loop sync.WaitGroup
	loop.Go(func() {
		followUpRetries(ctx, changed, []time.Duration{time.Millisecond, time.Millisecond, time.Millisecond, time.Millisecond, time.Millisecond}, retry)
	})
	defer loop.Wait()
	defer cancel()

	next := func() int {
		select {
		case n := <-calls:
			return n
		case <-time.After(10 * time.Second):
			require.FailNow(t, "no retry within 10s")
			return -1
		}
	}
	changed <- struct{}{}
	// The change's retry and three follow-ups: the last finds none refused.
	assert.Equal(t, []int{3, 2, 1, 0}, []int{next(), next(), next(), next()})
	select {
	case n := <-calls:
		assert.Failf(t, "a retry after none was refused", "found %d", n)
	case <-time.After(50 * time.Millisecond):
	}

	// A parent refused for good: the follow-ups end after the last wait.
	mu.Lock()
	refusedLeft = 1000
	mu.Unlock()
	changed <- struct{}{}
	for range 6 { // the change's retry and one per wait
		next()
	}
	select {
	case <-calls:
		assert.Fail(t, "a retry after the last wait")
	case <-time.After(50 * time.Millisecond):
	}
}
