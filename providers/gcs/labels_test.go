package gcs

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestLabelRules(t *testing.T) {
	tests := []struct {
		s          string
		key, value bool
	}{
		{"", false, true},
		{"a", true, true},
		{"a-b_c9", true, true},
		{"9a", false, true},
		{"-a", false, true},
		{"日本", true, true},
		{"ü", true, true},
		{"A", false, false},
		{"Ü", false, false},
		{"a b", false, false},
		{"x.y", false, false},
		{"٣", false, true},
		{strings.Repeat("a", 63), true, true},
		{strings.Repeat("a", 64), false, false},
		{strings.Repeat("é", 63), true, true},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.key, ValidLabelKey(tt.s), "key %q", tt.s)
		assert.Equal(t, tt.value, ValidLabelValue(tt.s), "value %q", tt.s)
	}
}
