package diff

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestUnified(t *testing.T) {
	for _, tc := range []struct {
		name, a, b, want string
	}{
		{name: "equal", a: "x: 1\n", b: "x: 1\n", want: ""},
		{name: "a change ends with the last line, not an empty one",
			a: "a: 1\nb: 2\n", b: "a: 1\nb: 3\n",
			want: "--- live\n+++ new\n@@ -1,2 +1,2 @@\n a: 1\n-b: 2\n+b: 3\n"},
		{name: "no newline at the end", a: "a: 1", b: "a: 2",
			want: "--- live\n+++ new\n@@ -1 +1 @@\n-a: 1\n+a: 2\n"},
		{name: "created", a: "", b: "a: 1\n",
			want: "--- live\n+++ new\n@@ -0,0 +1 @@\n+a: 1\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Unified("live", "new", tc.a, tc.b))
		})
	}
}
