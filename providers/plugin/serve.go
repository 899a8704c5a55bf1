package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/cuengine/engine/providers"
)

// stopGrace is how long a stopping plugin lets calls in flight finish.
const stopGrace = 10 * time.Second

// Serve is a plugin's main: it serves p under name on the socket the
// engine gave it and returns (exits the process) when the engine asks it
// to stop (SIGTERM, SIGINT) or goes away (its stdin closes). Its log, on
// stderr, ends up in the engine's.
func Serve(name string, p providers.Provider) {
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := serve(ctx, name, p, os.Getenv(EnvSocket), os.Stdin, logger); err != nil {
		logger.Error("plugin stopped", "provider", name, "error", err)
		stop()
		os.Exit(1)
	}
}

// serve listens on socket until ctx ends or stdin reaches its end, then
// stops gracefully.
func serve(ctx context.Context, name string, p providers.Provider, socket string, stdin io.Reader, logger *slog.Logger) error {
	return serveVersion(ctx, name, ProtocolVersion, p, socket, stdin, logger)
}

// serveVersion is serve answering the handshake with version.
func serveVersion(ctx context.Context, name string, version int, p providers.Provider, socket string, stdin io.Reader, logger *slog.Logger) error {
	if socket == "" {
		return fmt.Errorf("%s%s is started by the engine, which finds it in its --provider-dir; %s is not set", Prefix, name, EnvSocket)
	}
	ln, err := net.Listen("unix", socket)
	if err != nil {
		return fmt.Errorf("listening: %w", err)
	}
	srv := grpc.NewServer(grpc.ForceServerCodec(codec{}))
	srv.RegisterService(&serviceDesc, &server{name: name, version: version, p: p})

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		// The engine holds the other end of stdin and never writes: EOF
		// means it is gone, whatever killed it.
		_, _ = io.Copy(io.Discard, stdin)
		cancel()
	}()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	logger.Info("plugin serving", "provider", name, "protocol", version)

	select {
	case err := <-served:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	done := make(chan struct{})
	go func() { srv.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(stopGrace):
		srv.Stop()
	}
	logger.Info("plugin stopped", "provider", name)
	return nil
}

// server adapts a providers.Provider to the service.
type server struct {
	name    string
	version int // ProtocolVersion, another in tests
	p       providers.Provider
}

var _ service = (*server)(nil)

// handshake answers with the plugin's own version and name; the engine
// decides whether it can talk to them.
func (s *server) handshake(_ context.Context, _ *handshakeRequest) (*handshakeResponse, error) {
	return &handshakeResponse{ProtocolVersion: s.version, Name: s.name}, nil
}

func (s *server) externalName(ctx context.Context, w *wireRequest) (*externalNameResponse, error) {
	req, err := fromWire(w)
	if err != nil {
		return &externalNameResponse{Error: errorToWire(providers.Terminal(providers.ReasonInvalidSpec, "%w", err))}, nil
	}
	name, settings, err := s.p.ExternalName(ctx, req, w.Attempt)
	if err != nil {
		if ended := callEnded(ctx); ended != nil {
			return nil, ended
		}
		return &externalNameResponse{Error: errorToWire(err)}, nil
	}
	return &externalNameResponse{Name: name, Settings: settings}, nil
}

func (s *server) apply(ctx context.Context, w *wireRequest) (*applyResponse, error) {
	req, err := fromWire(w)
	if err != nil {
		return &applyResponse{Error: errorToWire(providers.Terminal(providers.ReasonInvalidSpec, "%w", err))}, nil
	}
	obs, err := s.p.Apply(ctx, req)
	if err != nil {
		if ended := callEnded(ctx); ended != nil {
			return nil, ended
		}
		return &applyResponse{Error: errorToWire(err)}, nil
	}
	resp := &applyResponse{Exists: obs.Exists, Ready: obs.Ready, Sensitive: obs.Sensitive}
	if obs.State != nil {
		b, err := json.Marshal(obs.State)
		if err != nil {
			return &applyResponse{Error: errorToWire(fmt.Errorf("encoding the observed state: %w", err))}, nil
		}
		resp.State = b
	}
	return resp, nil
}

func (s *server) delete(ctx context.Context, w *wireRequest) (*deleteResponse, error) {
	req, err := fromWire(w)
	if err != nil {
		return &deleteResponse{Error: errorToWire(providers.Terminal(providers.ReasonInvalidSpec, "%w", err))}, nil
	}
	if err := s.p.Delete(ctx, req); err != nil {
		if ended := callEnded(ctx); ended != nil {
			return nil, ended
		}
		return &deleteResponse{Error: errorToWire(err)}, nil
	}
	return &deleteResponse{}, nil
}

func (s *server) plan(ctx context.Context, w *wireRequest) (*planResponse, error) {
	req, err := fromWire(w)
	if err != nil {
		return &planResponse{Error: errorToWire(providers.Terminal(providers.ReasonInvalidSpec, "%w", err))}, nil
	}
	plan, err := s.p.Plan(ctx, req)
	if err != nil {
		if ended := callEnded(ctx); ended != nil {
			return nil, ended
		}
		return &planResponse{Error: errorToWire(err)}, nil
	}
	resp := &planResponse{Action: string(plan.Action), Reason: plan.Reason}
	for _, c := range plan.Changes {
		if c.Sensitive {
			c.From, c.To = "", "" // a secret never crosses the socket in a plan
		}
		resp.Changes = append(resp.Changes, wireChange(c))
	}
	return resp, nil
}

// callEnded is the gRPC status of a call whose deadline passed or whose
// caller cancelled it, nil while it runs. A provider's error after that is
// the end of the call, not the provider's answer: sent as a status, the
// engine's side classifies it as a Timeout whichever clock, the plugin's
// copy of the deadline or the engine's, fired first.
func callEnded(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return status.FromContextError(err).Err()
	}
	return nil
}
