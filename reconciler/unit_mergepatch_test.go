package reconciler

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMergeDiffIsTheJSONMergePatch: the status patch built on the maps is
// the merge patch jsonpatch builds from their JSON, for random statuses and
// random edits of them: fields added, removed, changed in type or value,
// lists and maps changed deep inside, numbers as int64 or float64.
func TestMergeDiffIsTheJSONMergePatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(39, 1))
	for i := range 3000 {
		stored := randomMap(rng, 3)
		next := edit(rng, stored, 3)
		require.True(t, jsonValue(stored) && jsonValue(next))
		from, err := json.Marshal(stored)
		require.NoError(t, err)
		to, err := json.Marshal(next)
		require.NoError(t, err)
		want, err := jsonpatch.CreateMergePatch(from, to)
		require.NoError(t, err)
		got, err := json.Marshal(mergeDiff(stored, next))
		require.NoError(t, err)
		require.JSONEq(t, string(want), string(got), "case %d: %s -> %s", i, from, to)
	}
}

// TestMergeDiffIntegersExact: two integers beyond float64's precision are
// different numbers, a change the JSON route lost (its patch was empty);
// an int64 and a float64 of the same value are the same number.
func TestMergeDiffIntegersExact(t *testing.T) {
	stored := map[string]any{"big": int64(1) << 60, "same": int64(3), "list": []any{int64(1), 2.5}}
	next := map[string]any{"big": int64(1)<<60 + 1, "same": float64(3), "list": []any{float64(1), 2.5}}
	patch, err := statusPatch("9", stored, next)
	require.NoError(t, err)
	assert.JSONEq(t, `{"metadata":{"resourceVersion":"9"},"status":{"big":1152921504606846977}}`, string(patch))
}

// TestStatusPatchOtherTypes: a status holding a value of a type mergeDiff
// does not know goes through its JSON, as before.
func TestStatusPatchOtherTypes(t *testing.T) {
	stored := map[string]any{"hosts": []string{"a"}, "n": int64(1)}
	next := map[string]any{"hosts": []string{"a", "b"}, "n": int64(1)}
	require.False(t, jsonValue(next))
	patch, err := statusPatch("5", stored, next)
	require.NoError(t, err)
	assert.JSONEq(t, `{"metadata":{"resourceVersion":"5"},"status":{"hosts":["a","b"]}}`, string(patch))
}

func randomValue(rng *rand.Rand, depth int) any {
	switch n := rng.IntN(9); {
	case n == 0 && depth > 0:
		return randomMap(rng, depth-1)
	case n == 1 && depth > 0:
		l := make([]any, rng.IntN(3))
		for i := range l {
			l[i] = randomValue(rng, depth-1)
		}
		return l
	case n == 2:
		return nil
	case n == 3:
		return rng.IntN(2) == 0
	case n == 4:
		return int64(rng.IntN(4))
	case n == 5:
		return float64(rng.IntN(4)) // equal to the int64 of the same value
	case n == 6:
		return float64(rng.IntN(4)) + 0.5
	default:
		return fmt.Sprint("v", rng.IntN(3))
	}
}

func randomMap(rng *rand.Rand, depth int) map[string]any {
	m := map[string]any{}
	for range rng.IntN(5) {
		m[fmt.Sprint("k", rng.IntN(6))] = randomValue(rng, depth)
	}
	return m
}

// edit returns a copy of m with random fields added, removed, replaced or
// edited deeper down.
func edit(rng *rand.Rand, m map[string]any, depth int) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		switch rng.IntN(6) {
		case 0: // removed
		case 1:
			out[k] = randomValue(rng, depth)
		case 2:
			if sub, ok := v.(map[string]any); ok {
				out[k] = edit(rng, sub, depth-1)
				continue
			}
			out[k] = v
		default:
			out[k] = v
		}
	}
	for range rng.IntN(2) {
		out[fmt.Sprint("k", rng.IntN(8))] = randomValue(rng, depth)
	}
	return out
}
