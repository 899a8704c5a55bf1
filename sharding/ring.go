package sharding

import (
	"hash/fnv"
	"slices"
	"strconv"
)

// tokensPerShard is how many points each shard has on the ring: enough
// that three shards each get within a few percent of a third of the keys.
const tokensPerShard = 128

// Ring is a consistent-hash ring over a set of shards: a key belongs to the
// first shard token at or after the key's hash. Adding or removing one
// shard moves only the keys between its tokens and their predecessors:
// about 1/n of them. A Ring is immutable.
type Ring struct {
	tokens []token
}

type token struct {
	hash  uint64
	shard string
}

// NewRing builds the ring of the given shards; their order does not matter.
func NewRing(shards []string) *Ring {
	r := &Ring{tokens: make([]token, 0, len(shards)*tokensPerShard)}
	for _, s := range shards {
		for i := range tokensPerShard {
			r.tokens = append(r.tokens, token{hash: hash(s + "#" + strconv.Itoa(i)), shard: s})
		}
	}
	slices.SortFunc(r.tokens, func(a, b token) int {
		switch {
		case a.hash < b.hash:
			return -1
		case a.hash > b.hash:
			return 1
		case a.shard < b.shard:
			return -1
		case a.shard > b.shard:
			return 1
		}
		return 0
	})
	return r
}

// Get returns the shard a key belongs to, "" when the ring is empty.
func (r *Ring) Get(key string) string {
	if len(r.tokens) == 0 {
		return ""
	}
	h := hash(key)
	i, _ := slices.BinarySearchFunc(r.tokens, h, func(t token, h uint64) int {
		switch {
		case t.hash < h:
			return -1
		case t.hash > h:
			return 1
		}
		return 0
	})
	if i == len(r.tokens) {
		i = 0
	}
	return r.tokens[i].shard
}

// hash is FNV-1a followed by a 64-bit finalizer (splitmix64): FNV alone
// spreads similar strings ("shard#1", "shard#2") poorly.
func hash(s string) uint64 {
	f := fnv.New64a()
	f.Write([]byte(s))
	x := f.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
