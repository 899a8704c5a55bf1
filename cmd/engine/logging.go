package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	uberzap "go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/term"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// Log formats of --log-format.
const (
	logFormatConsole = "console" // for a person: one line per event, key=value
	logFormatJSON    = "json"    // for a log pipeline: one JSON object per event
)

// logTerminal is what the choice of log format reads of the environment.
type logTerminal struct {
	isTerminal bool   // stderr is a terminal
	noColor    bool   // $NO_COLOR is set (https://no-color.org)
	term       string // $TERM
}

// stderrTerminal reads the environment of this process.
func stderrTerminal() logTerminal {
	_, noColor := os.LookupEnv("NO_COLOR")
	return logTerminal{isTerminal: term.IsTerminal(int(os.Stderr.Fd())), noColor: noColor, term: os.Getenv("TERM")}
}

// chooseLogFormat returns the log format: the flag's when given; otherwise
// console for `engine dev` and for a person at a terminal, and JSON for
// everything else (a pod, where a log pipeline reads stderr).
func chooseLogFormat(flag string, dev bool, t logTerminal) (string, error) {
	switch flag {
	case logFormatConsole, logFormatJSON:
		return flag, nil
	case "":
	default:
		return "", fmt.Errorf("--log-format %q: want %s or %s", flag, logFormatConsole, logFormatJSON)
	}
	if dev || t.isTerminal {
		return logFormatConsole, nil
	}
	return logFormatJSON, nil
}

// useColor: colour only on a terminal that can show it, and not when the
// user opted out.
func useColor(t logTerminal) bool {
	return t.isTerminal && !t.noColor && t.term != "dumb"
}

// setLogger sets controller-runtime's logger, which the engine's own logging
// goes through, from the flags.
func (o *runOptions) setLogger(cmd *cobra.Command, dev bool) error {
	t := stderrTerminal()
	format, err := chooseLogFormat(o.logFormat, dev, t)
	if err != nil {
		return err
	}
	ctrl.SetLogger(newLogger(&o.zap, format, useColor(t), cmd.Flags().Changed("zap-stacktrace-level")))
	return nil
}

// newLogger builds the logger of `engine run` and `engine dev` from the zap
// flags and the chosen format. stacktraceSet tells whether
// --zap-stacktrace-level was given.
func newLogger(opts *zap.Options, format string, color bool, stacktraceSet bool) logr.Logger {
	o := *opts
	switch format {
	case logFormatJSON:
		o.NewEncoder = jsonEncoder
	case logFormatConsole:
		o.NewEncoder = consoleEncoder(color)
		// Fields become key=value on the message line.
		o.ZapOpts = append(slices.Clone(o.ZapOpts), uberzap.WrapCore(func(c zapcore.Core) zapcore.Core { return &keyValueCore{Core: c} }))
		// A stack trace under every logged error splits events over many
		// lines; a person reads the error's own message.
		if !stacktraceSet {
			o.StacktraceLevel = zapcore.PanicLevel
		}
	}
	return zap.New(zap.UseFlagOptions(&o))
}

// jsonEncoder is controller-runtime's own JSON encoder, whatever --zap-devel
// says.
func jsonEncoder(eco ...zap.EncoderConfigOption) zapcore.Encoder {
	cfg := uberzap.NewProductionEncoderConfig()
	for _, opt := range eco {
		opt(&cfg)
	}
	return zapcore.NewJSONEncoder(cfg)
}

// consoleEncoder writes "time LEVEL logger message" separated by spaces;
// keyValueCore has put the fields in the message.
func consoleEncoder(color bool) zap.NewEncoderFunc {
	return func(eco ...zap.EncoderConfigOption) zapcore.Encoder {
		cfg := zapcore.EncoderConfig{
			TimeKey: "T", LevelKey: "L", NameKey: "N", MessageKey: "M", CallerKey: "C", StacktraceKey: "S",
			LineEnding:       zapcore.DefaultLineEnding,
			EncodeLevel:      zapcore.CapitalLevelEncoder,
			EncodeDuration:   zapcore.StringDurationEncoder,
			EncodeName:       zapcore.FullNameEncoder,
			ConsoleSeparator: " ",
		}
		for _, opt := range eco {
			opt(&cfg)
		}
		// The time of day: a person reads a live log, not an archive.
		cfg.EncodeTime = zapcore.TimeEncoderOfLayout("15:04:05.000")
		if color {
			cfg.EncodeLevel = zapcore.CapitalColorLevelEncoder
		}
		return zapcore.NewConsoleEncoder(cfg)
	}
}

// keyValueCore writes an entry's fields, and those added with WithValues, as
// key=value after its message, so that the console encoder prints one plain
// line per event (its own rendering of fields is a JSON object).
type keyValueCore struct {
	zapcore.Core
	fields []zapcore.Field // from With, in order
}

func (c *keyValueCore) With(fields []zapcore.Field) zapcore.Core {
	return &keyValueCore{Core: c.Core, fields: append(slices.Clone(c.fields), fields...)}
}

func (c *keyValueCore) Check(ent zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(ent.Level) {
		return ce.AddCore(ent, c)
	}
	return ce
}

func (c *keyValueCore) Write(ent zapcore.Entry, fields []zapcore.Field) error {
	var b strings.Builder
	b.WriteString(ent.Message)
	writeKeyValues(&b, c.fields)
	writeKeyValues(&b, fields)
	ent.Message = b.String()
	return c.Core.Write(ent, nil)
}

// writeKeyValues appends " key=value" per field. Values that would break the
// line or the pairs (spaces, quotes, "=", newlines, an empty string) are
// quoted; structured values are JSON.
func writeKeyValues(w io.StringWriter, fields []zapcore.Field) {
	for _, f := range fields {
		enc := zapcore.NewMapObjectEncoder()
		f.AddTo(enc)
		for _, k := range sortedKeys(enc.Fields, f.Key) {
			if k == f.Key+"Verbose" {
				continue // zap's %+v of an error: a second, multi-line copy of it
			}
			_, _ = w.WriteString(" " + k + "=" + formatValue(enc.Fields[k]))
		}
	}
}

// sortedKeys lists first a field's own key, then any others it added
// (an error adds "errorVerbose"), in a stable order.
func sortedKeys(m map[string]any, first string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		if k != first {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	if _, ok := m[first]; ok {
		keys = append([]string{first}, keys...)
	}
	return keys
}

// formatValue renders one value for key=value.
func formatValue(v any) string {
	switch v := v.(type) {
	case string:
		return quoteIfNeeded(v)
	case fmt.Stringer:
		return quoteIfNeeded(v.String())
	case interface {
		GetNamespace() string
		GetName() string
	}: // a Kubernetes object: its reference, as controller-runtime's encoder does
		return quoteIfNeeded(strings.TrimPrefix(v.GetNamespace()+"/"+v.GetName(), "/"))
	}
	b, err := json.Marshal(v)
	if err != nil {
		return quoteIfNeeded(fmt.Sprint(v))
	}
	if ref, ok := objectRef(b); ok {
		return quoteIfNeeded(ref)
	}
	return string(b)
}

// objectRef shortens an object reference as klog and controller-runtime log
// it ({"name": ..., "namespace": ...}) to namespace/name.
func objectRef(b []byte) (string, bool) {
	var ref map[string]any
	if json.Unmarshal(b, &ref) != nil || len(ref) == 0 || len(ref) > 2 {
		return "", false
	}
	name, ok := ref["name"].(string)
	ns, nsOK := ref["namespace"].(string)
	if !ok || (len(ref) == 2 && !nsOK) {
		return "", false
	}
	return strings.TrimPrefix(ns+"/"+name, "/"), true
}

func quoteIfNeeded(s string) string {
	if s == "" || strings.ContainsFunc(s, func(r rune) bool {
		return r == '"' || r == '=' || unicode.IsSpace(r) || !unicode.IsPrint(r)
	}) {
		return strconv.Quote(s)
	}
	return s
}
