package plugin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"

	"github.com/cuengine/engine/providers"
)

// The tests run their own binary as the plugin: with envTestPlugin set,
// TestMain serves testProvider instead of running tests, and with
// envTestHost set it is an engine of its own that supervises one plugin
// (the parent-death test kills it).
const (
	envTestPlugin  = "ENGINE_TEST_PLUGIN"
	envTestVersion = "ENGINE_TEST_PLUGIN_VERSION"
	envTestHost    = "ENGINE_TEST_HOST"
)

// secret is the Sensitive output of every successful Apply.
const secret = "hunter2-s3cr3t-value"

func TestMain(m *testing.M) {
	switch {
	case os.Getenv(envTestPlugin) != "":
		version := ProtocolVersion
		if v := os.Getenv(envTestVersion); v != "" {
			version, _ = strconv.Atoi(v)
		}
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		defer stop()
		logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
		if err := serveVersion(ctx, os.Getenv(envTestPlugin), version, testProvider{}, os.Getenv(EnvSocket), os.Stdin, logger); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	case os.Getenv(envTestHost) != "":
		os.Exit(runTestHost())
	}
	os.Exit(m.Run())
}

// runTestHost supervises one plugin, prints its pid once it is up, and
// waits to be killed.
func runTestHost() int {
	self, err := os.Executable()
	if err != nil {
		return 1
	}
	p := New(Options{Name: "fake", Path: self, Env: []string{envTestPlugin + "=fake"}, Logger: logr.Discard()})
	go func() { _ = p.Run(context.Background()) }()
	for range 300 {
		if st := p.Status(); st.Up {
			fmt.Println(st.Pid)
			select {}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return 1
}

// testProvider does what its spec's "do" says.
type testProvider struct{}

func (testProvider) ExternalName(ctx context.Context, req providers.Request, attempt int) (string, map[string]string, error) {
	switch req.Spec["do"] {
	case "terminal":
		return "", nil, providers.Terminal(providers.ReasonInvalidName, "name %q is too long", req.Name)
	case "block":
		fmt.Fprintln(os.Stderr, "external name blocks")
		<-ctx.Done()
		fmt.Fprintln(os.Stderr, "external name ended by the caller:", ctx.Err())
		return "", nil, ctx.Err()
	}
	return fmt.Sprintf("%s-%s-%d", req.Name, req.Owner.UID, attempt), map[string]string{"project": "p1"}, nil
}

func (testProvider) Apply(ctx context.Context, req providers.Request) (providers.Observation, error) {
	switch req.Spec["do"] {
	case "terminal":
		return providers.Observation{}, providers.Terminal(providers.ReasonNameConflict, "bucket %s is not ours", req.ExternalName)
	case "retryable":
		return providers.Observation{}, providers.Retryable(providers.ReasonRateLimited, errors.New("slow down"))
	case "plain":
		return providers.Observation{}, errors.New("something broke")
	case "block":
		<-ctx.Done()
		fmt.Fprintln(os.Stderr, "apply ended by the caller:", ctx.Err())
		return providers.Observation{}, ctx.Err()
	case "crash":
		os.Exit(3)
	case "deadline":
		dl, ok := ctx.Deadline()
		if !ok {
			return providers.Observation{}, errors.New("no deadline")
		}
		return providers.Observation{Exists: true, State: map[string]any{"deadline": dl.UnixNano()}}, nil
	}
	return providers.Observation{
		Exists:    true,
		Ready:     true,
		State:     map[string]any{"name": req.ExternalName, "spec": req.Spec, "settings": req.Settings, "owner": req.Owner.Namespace + "/" + req.Owner.Name},
		Sensitive: map[string][]byte{"password": []byte(secret)},
	}, nil
}

func (testProvider) Delete(_ context.Context, req providers.Request) error {
	if req.Spec["do"] == "retryable" {
		return providers.Retryable(providers.ReasonUnavailable, errors.New("try later"))
	}
	return nil
}

func (testProvider) Plan(ctx context.Context, req providers.Request) (providers.Plan, error) {
	switch req.Spec["do"] {
	case "retryable":
		return providers.Plan{}, providers.Retryable(providers.ReasonUnavailable, errors.New("try later"))
	case "refuse":
		return providers.Plan{Action: providers.ActionRefuse, Reason: "spec.location cannot change"}, nil
	case "unknown":
		return providers.Plan{Action: "Explode"}, nil
	case "block":
		<-ctx.Done()
		return providers.Plan{}, ctx.Err()
	}
	// A plugin that carelessly puts a secret in a sensitive change: the
	// wire drops it.
	return providers.Plan{Action: providers.ActionUpdate, Changes: []providers.Change{
		{Field: "labels.team", From: `"a"`, To: `"b"`},
		{Field: "password", From: secret, To: secret, Sensitive: true},
	}}, nil
}

// logBuffer is a logr.Logger writing into a buffer the test reads.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.b.WriteString(prefix + " " + args + "\n")
	}, funcr.Options{})
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func discardSlog() *slog.Logger { return slog.New(slog.DiscardHandler) }
