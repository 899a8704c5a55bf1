package plugin

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cuengine/engine/providers"
)

// TestWireRequestCarriesEveryField: a providers.Request with every field
// set comes out of toWire and fromWire as it went in, so a field added to
// the contract and forgotten here (as ResetCredentials once was: a lost
// connection Secret came back without a password) fails this test.
func TestWireRequestCarriesEveryField(t *testing.T) {
	req := providers.Request{
		Name:             "db",
		ExternalName:     "orders_0123abcd",
		Owner:            providers.Owner{UID: "6c1d0c84-55d9-4a0b-9a0e-2b8d4f5c7e10", Namespace: "shop", Name: "orders", Kind: "WebApp"},
		Spec:             map[string]any{"database": "orders", "size": int64(3)},
		Settings:         map[string]string{"role": "orders_0123abcd"},
		ResetCredentials: true,
	}
	v := reflect.ValueOf(req)
	for i := range v.NumField() {
		require.False(t, v.Field(i).IsZero(), "the sample sets providers.Request.%s: set it when adding a field", v.Type().Field(i).Name)
	}
	w, err := toWire(req, 2)
	require.NoError(t, err)
	assert.Equal(t, 2, w.Attempt)
	got, err := fromWire(w)
	require.NoError(t, err)
	assert.Equal(t, req, got)
}
