package openapi

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/cuengine/engine/contract"
)

// TestEngineStatusSchema: the CRD declares every status field the engine
// writes, and nothing else of the engine's.
func TestEngineStatusSchema(t *testing.T) {
	declared := map[string]bool{}
	for name := range engineStatusSchema() {
		declared[name] = true
	}
	for _, name := range contract.EngineStatusFields() {
		assert.True(t, declared[name], "the CRD declares status.%s", name)
	}
	assert.Len(t, declared, len(contract.EngineStatusFields()), "and nothing else of the engine's")
}
