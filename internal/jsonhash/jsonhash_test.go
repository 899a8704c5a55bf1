package jsonhash

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestSumIsTheHashOfTheJSON: for random values (nested maps and lists,
// strings that need escaping, numbers of every type, typed values that go
// through encoding/json) and a Deployment as unstructured, Sum is the
// hash of json.Marshal's bytes, and fails where it fails.
func TestSumIsTheHashOfTheJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(39, 2))
	for i := range 5000 {
		v := random(rng, 4)
		b, err := json.Marshal(v)
		require.NoError(t, err)
		got, err := Sum(v)
		require.NoError(t, err)
		require.Equal(t, sha256.Sum256(b), got, "case %d: %s", i, b)
	}

	replicas := int32(3)
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"app": "<web>&"}},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas}}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(d)
	require.NoError(t, err)
	b, err := json.Marshal(u)
	require.NoError(t, err)
	got, err := Sum(u)
	require.NoError(t, err)
	require.Equal(t, sha256.Sum256(b), got)

	_, err = Sum(map[string]any{"a": []any{math.Inf(1)}})
	require.Error(t, err)
	_, err = json.Marshal(map[string]any{"a": []any{math.Inf(1)}})
	require.Error(t, err)
}

var strs = []string{"", "plain", "quote\"", "back\\slash", "<html>&", "tab\t", "nl\n", "del\x7f", "é", "\u2028", "bad\xff", "日本", "ctrl\x01"}

func random(rng *rand.Rand, depth int) any { return randomValue(rng, depth, false) }

// randomValue is a random value; with decoded, only of the kinds
// utiljson.Unmarshal makes (strings of valid UTF-8, int64, float64 with
// integral values among them), for Append.
func randomValue(rng *rand.Rand, depth int, decoded bool) any {
	keys := strs
	if decoded {
		keys = strs[:len(strs)-4] // valid UTF-8
	}
	switch n := rng.IntN(14); {
	case n == 0 && depth > 0:
		m := map[string]any{}
		for range rng.IntN(5) {
			m[keys[rng.IntN(len(keys))]+fmt.Sprint(rng.IntN(3))] = randomValue(rng, depth-1, decoded)
		}
		return m
	case n == 1 && depth > 0:
		l := make([]any, rng.IntN(4))
		for i := range l {
			l[i] = randomValue(rng, depth-1, decoded)
		}
		return l
	case n == 2:
		return nil
	case n == 3:
		return rng.IntN(2) == 0
	case n == 4:
		return rng.Int64() - math.MaxInt64/2
	case n == 7 || decoded && n >= 5 && n <= 6:
		return []float64{0, 1, -2.5, 1e21, 1e-7, 123456789.125, 3, -1e300, math.SmallestNonzeroFloat64}[rng.IntN(9)]
	case decoded && n >= 8 && n <= 11:
		return rng.NormFloat64() * 1e6
	case n == 5:
		return rng.IntN(1000) - 500
	case n == 6:
		return int32(rng.IntN(1000))
	case n == 8:
		return map[string]string{"b": "x", "a": "<y>"}
	case n == 9:
		return map[string]any(nil)
	case n == 10:
		return []any(nil)
	case n == 11:
		return json.Number("12.50")
	case n == 12:
		return strings.Repeat("long", 400) // past the flush size
	default:
		return keys[rng.IntN(len(keys))]
	}
}
