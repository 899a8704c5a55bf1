package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"
)

// probeServer serves /healthz and /readyz. Unlike controller-runtime's
// probe endpoint, which withholds the reason of a failed check, /readyz
// says what is wrong (the apiserver unreachable, a template on disk that
// cannot be served, a kind whose CRD is missing, a provider plugin down),
// so `kubectl describe pod` and curl show it.
type probeServer struct {
	addr      string
	eng       engineState
	apiserver func(context.Context) error
	plugins   func() error
	// pluginLines, when set, says what each plugin is doing, listed by
	// /readyz?verbose.
	pluginLines func() []string
}

// readyz answers "ok" or "not ready: " and why; ?verbose adds what each
// provider plugin is doing, a line each.
func (p *probeServer) readyz(w http.ResponseWriter, r *http.Request) {
	body, code := "ok", http.StatusOK
	if err := readiness(r.Context(), p.eng, p.apiserver, p.plugins); err != nil {
		body, code = "not ready: "+err.Error(), http.StatusInternalServerError
	}
	if r.URL.Query().Has("verbose") && p.pluginLines != nil {
		body = strings.Join(append([]string{body}, p.pluginLines()...), "\n")
	}
	if code != http.StatusOK {
		http.Error(w, body, code)
		return
	}
	fmt.Fprintln(w, body)
}

// NeedLeaderElection: every replica answers probes.
func (p *probeServer) NeedLeaderElection() bool { return false }

// Start implements manager.Runnable.
func (p *probeServer) Start(ctx context.Context) error {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", p.readyz)
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		return fmt.Errorf("health probe endpoint: %w", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
