package main

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/cuengine/engine/engine"
)

type fakeEngineState struct {
	reloadErr error
	kinds     []engine.KindStatus
}

func (f fakeEngineState) ReloadError() error          { return f.reloadErr }
func (f fakeEngineState) Status() []engine.KindStatus { return f.kinds }

// TestReadiness: /readyz says what is wrong, the apiserver first.
func TestReadiness(t *testing.T) {
	up := func(context.Context) error { return nil }
	down := func(context.Context) error { return errors.New("dial tcp 10.0.0.1:443: connect: connection refused") }
	for _, tc := range []struct {
		name      string
		state     fakeEngineState
		apiserver func(context.Context) error
		plugins   func() error
		want      string
	}{
		{"ready", fakeEngineState{kinds: []engine.KindStatus{{Kind: "MyKind.webapp.my.domain/v1", Running: true}}}, up, nil, ""},
		{"apiserver down", fakeEngineState{}, down, nil, "the apiserver is unreachable (nothing is reconciled until it is back; nothing is lost): dial tcp 10.0.0.1:443: connect: connection refused"},
		{"plugin down", fakeEngineState{}, up, func() error {
			return errors.New("provider gcs: plugin /engine-provider-gcs down (restarts: 2): exited: signal: killed")
		}, "provider gcs: plugin /engine-provider-gcs down (restarts: 2): exited: signal: killed (its resources wait, ProviderUnavailable; nothing is deleted)"},
		{"reload refused", fakeEngineState{reloadErr: errors.New("mykind.cue:3:1: bad")}, up, nil, "templates on disk not served (the last good version is): mykind.cue:3:1: bad"},
		{"kind not served", fakeEngineState{kinds: []engine.KindStatus{{Kind: "Ghost.ghost.cuengine.dev/v1", Template: "ghost.cue", Error: "no CRD"}}}, up, nil, "Ghost.ghost.cuengine.dev/v1 (template ghost.cue): no CRD"},
		{"kind stalled", fakeEngineState{kinds: []engine.KindStatus{{Kind: "MyKind.webapp.my.domain/v1", Template: "mykind.cue", Running: true, Stalled: "stalled: all 4 workers held"}}}, up, nil, "MyKind.webapp.my.domain/v1 (template mykind.cue): stalled: all 4 workers held"},
		{"revision held", fakeEngineState{kinds: []engine.KindStatus{{Kind: "MyKind.webapp.my.domain/v1", Template: "mykind.cue", Running: true, Held: "revision 4 held: would delete 2 children"}}}, up, nil, "MyKind.webapp.my.domain/v1 (template mykind.cue): revision 4 held: would delete 2 children"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plugins := tc.plugins
			if plugins == nil {
				plugins = func() error { return nil }
			}
			err := readiness(context.Background(), tc.state, tc.apiserver, plugins)
			if tc.want == "" {
				assert.NoError(t, err)
				return
			}
			assert.EqualError(t, err, tc.want)
		})
	}
}
