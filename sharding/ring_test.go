package sharding

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/util/uuid"
)

func keys(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = string(uuid.NewUUID())
	}
	return out
}

func TestRingDistribution(t *testing.T) {
	ks := keys(30000)
	for _, n := range []int{2, 3, 4, 5, 10} {
		t.Run(fmt.Sprintf("%d shards", n), func(t *testing.T) {
			var shards []string
			for i := range n {
				shards = append(shards, fmt.Sprintf("engine-7d9f8c6b5-%05d", i))
			}
			r := NewRing(shards)
			count := map[string]int{}
			for _, k := range ks {
				count[r.Get(k)]++
			}
			assert.Len(t, count, n, "every shard gets keys")
			fair := float64(len(ks)) / float64(n)
			for s, c := range count {
				assert.InDelta(t, fair, float64(c), 0.25*fair, "shard %s holds %d of %d keys", s, c, len(ks))
			}
		})
	}
}

func TestRingMinimalMovement(t *testing.T) {
	ks := keys(20000)
	three := NewRing([]string{"a", "b", "c"})
	four := NewRing([]string{"d", "c", "b", "a"}) // order does not matter
	two := NewRing([]string{"a", "c"})
	joined, left := 0, 0
	for _, k := range ks {
		before := three.Get(k)
		if after := four.Get(k); after != before {
			joined++
			assert.Equal(t, "d", after, "a join moves keys only to the new shard")
		}
		if after := two.Get(k); after != before {
			left++
			assert.Equal(t, "b", before, "a leave moves only the keys of the shard that left")
		}
	}
	// About 1/4 of the keys move to a fourth shard, 1/3 away from a leaving one.
	assert.InDelta(t, float64(len(ks))/4, float64(joined), float64(len(ks))/16, "keys moved on a join")
	assert.InDelta(t, float64(len(ks))/3, float64(left), float64(len(ks))/12, "keys moved on a leave")
}

func TestRingEdges(t *testing.T) {
	assert.Equal(t, "", NewRing(nil).Get("x"), "no shard, no owner")
	one := NewRing([]string{"only"})
	for _, k := range keys(100) {
		assert.Equal(t, "only", one.Get(k))
	}
	a, b := NewRing([]string{"x", "y", "z"}), NewRing([]string{"z", "y", "x"})
	for _, k := range keys(1000) {
		assert.Equal(t, a.Get(k), b.Get(k), "the same shards give the same ring")
	}
}
