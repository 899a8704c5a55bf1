package harness

import (
	"bytes"
	"testing"

	"github.com/google/pprof/profile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// heapFixture is a heap profile in the shape the Go runtime writes: four
// sample values, the stack innermost first, an inlined frame first in its
// location's lines.
func heapFixture(t *testing.T) []byte {
	t.Helper()
	fn := func(id uint64, name string) *profile.Function {
		return &profile.Function{ID: id, Name: name, SystemName: name}
	}
	add := fn(1, "k8s.io/client-go/tools/cache.(*threadSafeMap).Add")
	decode := fn(2, "encoding/json.(*decodeState).object")
	inlined := fn(3, "github.com/cuengine/engine/render.newMemo[...]")
	caller := fn(4, "github.com/cuengine/engine/render.Render")
	loc := func(id uint64, fns ...*profile.Function) *profile.Location {
		l := &profile.Location{ID: id}
		for _, f := range fns {
			l.Line = append(l.Line, profile.Line{Function: f})
		}
		return l
	}
	lAdd, lDecode, lMemo, lCaller := loc(1, add), loc(2, decode), loc(3, inlined, caller), loc(4, caller)
	p := &profile.Profile{
		SampleType: []*profile.ValueType{
			{Type: "alloc_objects", Unit: "count"}, {Type: "alloc_space", Unit: "bytes"},
			{Type: "inuse_objects", Unit: "count"}, {Type: "inuse_space", Unit: "bytes"},
		},
		Sample: []*profile.Sample{
			{Location: []*profile.Location{lAdd, lCaller}, Value: []int64{9, 9000, 3, 3 << 20}},
			{Location: []*profile.Location{lDecode}, Value: []int64{50, 50 << 20, 1, 1 << 20}},
			{Location: []*profile.Location{lAdd}, Value: []int64{1, 100, 1, 1 << 20}},
			{Location: []*profile.Location{lMemo, lCaller}, Value: []int64{2, 200, 2, 2 << 20}},
			{Location: []*profile.Location{lCaller}, Value: []int64{7, 700, 0, 0}},
		},
		Location: []*profile.Location{lAdd, lDecode, lMemo, lCaller},
		Function: []*profile.Function{add, decode, inlined, caller},
	}
	var buf bytes.Buffer
	require.NoError(t, p.Write(&buf))
	return buf.Bytes()
}

func TestSummariseHeap(t *testing.T) {
	raw := heapFixture(t)
	tests := []struct {
		name string
		top  int
		want []heapSite
	}{
		{"every site holding memory, by in-use bytes then name", 12, []heapSite{
			{"cache.(*threadSafeMap).Add", 4 << 20},
			{"render.newMemo[...]", 2 << 20},
			{"json.(*decodeState).object", 1 << 20},
		}},
		{"the top two", 2, []heapSite{
			{"cache.(*threadSafeMap).Add", 4 << 20},
			{"render.newMemo[...]", 2 << 20},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := summariseHeap(raw, tt.top)
			require.NoError(t, err)
			assert.Equal(t, int64(7<<20), got.inuse)
			assert.Equal(t, tt.want, got.top)
		})
	}
}

func TestSummariseHeapErrors(t *testing.T) {
	cpu := &profile.Profile{SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}}}
	var buf bytes.Buffer
	require.NoError(t, cpu.Write(&buf))
	tests := []struct {
		name, want string
		raw        []byte
	}{
		{"not a heap profile", "parsing the heap profile: no inuse_space samples", buf.Bytes()},
		{"not a profile", "parsing the heap profile: parsing profile: unrecognized profile format", []byte("<html>404</html>")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := summariseHeap(tt.raw, heapTop)
			assert.EqualError(t, err, tt.want)
		})
	}
}

func TestShortFunction(t *testing.T) {
	tests := []struct{ in, want string }{
		{"k8s.io/client-go/tools/cache.(*threadSafeMap).Add", "cache.(*threadSafeMap).Add"},
		{"runtime.malg", "runtime.malg"},
		{"gopkg.in/yaml.v3.(*parser).node", "yaml.v3.(*parser).node"},
		{"github.com/cuengine/engine/render.newMemo[...]", "render.newMemo[...]"},
		{"k8s.io/utils/buffer.NewTypedRingGrowing[go.shape.interface {}]", "buffer.NewTypedRingGrowing[...]"},
		{"crypto/hmac.New[go.shape.interface { Sum([]uint8) []uint8 }]", "hmac.New[...]"},
		{"k8s.io/api/core/v1.init", "core/v1.init"},
		{"k8s.io/api/apps/v1beta1.(*Deployment).Unmarshal", "apps/v1beta1.(*Deployment).Unmarshal"},
		{"v1.init", "v1.init"},
		{"sigs.k8s.io/structured-merge-diff/v6/value.(*Map).Get", "value.(*Map).Get"},
		{"github.com/foo/bar/v2.New", "bar/v2.New"},
		{"vendor/golang.org/x/net/http2/hpack.init", "hpack.init"},
		{"sigs.k8s.io/structured-merge-diff/v6/value.NewValueInterface.func1", "value.NewValueInterface.func1"},
		{"", ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			assert.Equal(t, tt.want, shortFunction(tt.in))
		})
	}
}

func TestParseMemStat(t *testing.T) {
	text := []byte(`heap profile: 3: 1536 [90: 46080] @ heap/1048576
1: 512 [1: 512] @ 0x1 0x2

# runtime.MemStats
# Alloc = 8123456
# TotalAlloc = 99123456
# HeapAlloc = 8123456
# HeapSys = 16000000
# HeapInuse = 9000000
`)
	tests := []struct {
		field, wantErr string
		want           int64
	}{
		{"HeapAlloc", "", 8123456},
		{"HeapInuse", "", 9000000},
		{"Alloc", "", 8123456},
		{"StackInuse", "no StackInuse in the heap profile's MemStats", 0},
	}
	for _, tt := range tests {
		t.Run(tt.field, func(t *testing.T) {
			got, err := parseMemStat(text, tt.field)
			if tt.wantErr != "" {
				assert.EqualError(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
	_, err := parseMemStat([]byte("# HeapAlloc = lots\n"), "HeapAlloc")
	assert.EqualError(t, err, `malformed HeapAlloc in the heap profile: strconv.ParseInt: parsing "lots": invalid syntax`)
}
