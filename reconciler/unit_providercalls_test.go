package reconciler

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cuengine/engine/providers"
)

// TestProviderCallMetrics: every provider call is counted by operation
// and result (the error's reason), and timed.
func TestProviderCallMetrics(t *testing.T) {
	calls := func(op, result string) float64 {
		return testutil.ToFloat64(metricProviderCalls.WithLabelValues("fake", op, result))
	}
	timed := func() int { return testutil.CollectAndCount(metricProviderSeconds) }
	applied, unavailable, deleted := calls("apply", "success"), calls("apply", providers.ReasonUnavailable), calls("delete", "success")

	store := withRecords(t, storeParent(nil), bucketRecord("Delete"))
	e := newUnitEnv(t, unitStore, store)
	e.reconcileClean(store)
	assert.Equal(t, []string{"apply data-0"}, e.provider.takeCalls())
	assert.Equal(t, applied+1, calls("apply", "success"))
	assert.Positive(t, timed(), "the call is timed")

	e.provider.failing("apply data-0", providers.Retryable(providers.ReasonUnavailable, errors.New("503 from the API")))
	_, err := e.reconcile(store)
	require.Error(t, err)
	assert.Equal(t, unavailable+1, calls("apply", providers.ReasonUnavailable))
	assert.Equal(t, applied+1, calls("apply", "success"), "a failed call is not a success")

	assert.Equal(t, []string{"apply data-0"}, e.provider.takeCalls())

	gone := withRecords(t, storeParent(nil), bucketRecord("Delete"))
	gone.SetDeletionTimestamp(new(metav1.NewTime(time.Now())))
	e = newUnitEnv(t, unitStore, gone)
	_, err = e.reconcile(gone)
	require.NoError(t, err)
	assert.Equal(t, []string{"delete data-0"}, e.provider.takeCalls())
	assert.Equal(t, deleted+1, calls("delete", "success"))
}
