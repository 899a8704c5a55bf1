package jsonhash

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// TestAppendDecodesBack: random values of the types a decoded object
// holds (integral floats among them, which encoding/json would turn into
// int64s) decode from Append's bytes to the same Go values; what would
// not come back as it was is an error.
func TestAppendDecodesBack(t *testing.T) {
	rng := rand.New(rand.NewPCG(39, 3))
	for i := range 5000 {
		v := map[string]any{"v": randomValue(rng, 4, true)}
		b, err := Append(nil, v)
		require.NoError(t, err, "case %d", i)
		var got map[string]any
		require.NoError(t, utiljson.Unmarshal(b, &got), "case %d: %s", i, b)
		require.Equal(t, v, got, "case %d: %s", i, b)
	}

	b, err := Append([]byte("x"), map[string]any{"f": 2.0, "n": math.Copysign(0, -1), "i": int64(2)})
	require.NoError(t, err)
	require.Equal(t, `x{"f":2.0,"i":2,"n":-0.0}`, string(b))

	for _, bad := range []any{1, int32(1), json.Number("1"), math.Inf(1), math.NaN(), "bad\xff",
		map[string]any(nil), []any(nil), map[string]string{}, struct{}{}} {
		_, err := Append(nil, map[string]any{"a": []any{bad}})
		require.Error(t, err, "%#v", bad)
	}
}
