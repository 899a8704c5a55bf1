package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

func TestLogFormatChoice(t *testing.T) {
	terminal := logTerminal{isTerminal: true, term: "xterm-256color"}
	pipe := logTerminal{}
	for _, c := range []struct {
		name string
		flag string
		dev  bool
		t    logTerminal
		want string
	}{
		{"a pod: JSON for the log pipeline", "", false, pipe, logFormatJSON},
		{"a person at a terminal", "", false, terminal, logFormatConsole},
		{"engine dev at a terminal", "", true, terminal, logFormatConsole},
		{"engine dev piped (make dev | tee)", "", true, pipe, logFormatConsole},
		{"the flag over the terminal", "json", false, terminal, logFormatJSON},
		{"the flag over dev", "json", true, pipe, logFormatJSON},
		{"the flag in a pod", "console", false, pipe, logFormatConsole},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := chooseLogFormat(c.flag, c.dev, c.t)
			require.NoError(t, err)
			assert.Equal(t, c.want, got)
		})
	}
	_, err := chooseLogFormat("text", false, pipe)
	assert.EqualError(t, err, `--log-format "text": want console or json`)
}

func TestLogColor(t *testing.T) {
	assert.True(t, useColor(logTerminal{isTerminal: true, term: "xterm"}))
	assert.False(t, useColor(logTerminal{isTerminal: false, term: "xterm"}), "a pipe or a file gets no escape codes")
	assert.False(t, useColor(logTerminal{isTerminal: true, term: "dumb"}))
	assert.False(t, useColor(logTerminal{isTerminal: true, term: "xterm", noColor: true}), "NO_COLOR")
}

// logOnce logs what the engine and controller-runtime typically log, in
// format, and returns the output.
func logOnce(t *testing.T, format string, color bool) string {
	t.Helper()
	var buf bytes.Buffer
	opts := zap.Options{DestWriter: &buf}
	log := newLogger(&opts, format, color, false).WithName("engine").
		WithValues("controller", "mykind", "MyKind", klog.KRef("ns", "web"))
	parent := &unstructured.Unstructured{}
	parent.SetNamespace("ns")
	parent.SetName("web")
	log.Info("templates reloaded", "kinds", 3, "revision", "a1b2", "held", false, "parent", parent)
	log.Error(errors.New("mykind.cue:3:4: conflicting values\n    ./mykind.cue:5:2"), "Reconciler error", "reason", "")
	return buf.String()
}

func TestLogConsole(t *testing.T) {
	out := logOnce(t, logFormatConsole, false)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Len(t, lines, 2, "one line per event, no stack trace:\n%s", out)
	assert.Regexp(t, `^\d\d:\d\d:\d\d\.\d{3} INFO engine templates reloaded controller=mykind MyKind=ns/web kinds=3 revision=a1b2 held=false parent=ns/web$`, lines[0])
	assert.Regexp(t, `^\d\d:\d\d:\d\d\.\d{3} ERROR engine Reconciler error controller=mykind MyKind=ns/web reason="" error="mykind.cue:3:4: conflicting values\\n    ./mykind.cue:5:2"$`, lines[1])
	assert.NotContains(t, out, "\x1b[", "no colour unless asked")

	assert.Contains(t, logOnce(t, logFormatConsole, true), "\x1b[34mINFO\x1b[0m", "the level in colour")
}

func TestLogJSON(t *testing.T) {
	out := logOnce(t, logFormatJSON, false)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Len(t, lines, 2)
	var first map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &first))
	assert.Equal(t, "templates reloaded", first["msg"])
	assert.Equal(t, "a1b2", first["revision"])
	assert.Equal(t, map[string]any{"namespace": "ns", "name": "web"}, first["MyKind"])
	var second map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[1]), &second))
	assert.Contains(t, second, "stacktrace", "a log pipeline keeps controller-runtime's stack traces on errors")
}
