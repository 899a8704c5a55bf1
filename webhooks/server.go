package webhooks

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/cuengine/engine/evaluator"
	"github.com/cuengine/engine/render"
	"github.com/cuengine/engine/templates"
)

// Options configure the webhook server.
type Options struct {
	// Host and Port the server listens on.
	Host string
	Port int
	// CertDir holds the serving certificate, tls.crt and tls.key: written
	// from the Secret by the engine, or mounted (cert-manager).
	CertDir string
	// Namespace is the engine's: the Secret's and the Service's.
	Namespace string
	// SecretName is the Secret holding the CA and serving certificate the
	// engine rotates.
	SecretName string
	// Service and ServicePort are how the apiserver reaches the engine in
	// a cluster; URL ("https://localhost:9443"), when set, replaces them
	// (engine dev: the apiserver runs on this machine).
	Service     string
	ServicePort int
	URL         string
	// ConfigurationName names the ValidatingWebhookConfiguration.
	ConfigurationName string
	// FailurePolicy and Timeout of the webhook.
	FailurePolicy admissionregistrationv1.FailurePolicyType
	Timeout       time.Duration
	// CertManagerCertificate, "namespace/name", hands the certificate to
	// cert-manager: the engine serves the mounted files in CertDir, does
	// not rotate, and annotates the configuration for the cainjector.
	CertManagerCertificate string
	// RotationCheck is how often the rotator checks the certificates;
	// CertPoll how often the Secret is copied into CertDir.
	RotationCheck time.Duration
	CertPoll      time.Duration
	// CAWait bounds how long a new configuration waits, matching
	// nothing, for its CA to be injected (syncConfiguration); 30 seconds
	// when zero.
	CAWait time.Duration
	// Limits bound one conversion as they bound one evaluation: the
	// engine's (render.Limits); zero fields take the defaults.
	Limits render.Limits
	// Evaluators, when set, convert and validate the objects there, at
	// a lower CPU priority than the engine's, a review's in batches
	// (render.Convert, render.ConvertBatch): a flood of requests yields
	// the CPU to the reconciles.
	Evaluators *evaluator.Pool
	// Bounds limit what the port may cost (bounds.go).
	Bounds Bounds
	// ClientCAFile, when set, is the CA of the client certificates the
	// server verifies: /validate serves only a client that presents one
	// it signed (the apiserver, configured to); /convert serves a client
	// without one too, as the apiserver sends conversions with none
	// (apiextensions-apiserver's webhook converter has no client
	// credentials), but refuses one whose certificate the CA did not sign.
	ClientCAFile string
}

// Server is the engine's webhook server. It starts (certificates,
// listener) the first time a set has a template that needs it, and keeps
// the ValidatingWebhookConfiguration in line with every set.
type Server struct {
	opts   Options
	mgr    manager.Manager
	direct client.Client // uncached: the Secret, the configuration
	srv    webhook.Server

	set     atomic.Pointer[templates.Set]
	changed chan struct{} // a new set to sync; capacity 1
	started chan struct{} // closed once the server listens

	gate *gate // bounds.go

	startOnce sync.Once
	startErr  error
}

// New builds the server and adds the configuration's sync to mgr; the
// server itself is added by the first SetTemplates that needs it.
func New(mgr manager.Manager, opts Options) (*Server, error) {
	direct, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme()})
	if err != nil {
		return nil, err
	}
	var tlsOpts []func(*tls.Config)
	if opts.ClientCAFile != "" {
		opt, err := verifyClientCA(opts.ClientCAFile)
		if err != nil {
			return nil, err
		}
		tlsOpts = append(tlsOpts, opt)
	}
	g := newGate(opts.Bounds)
	s := &Server{
		opts:    opts,
		mgr:     mgr,
		direct:  direct,
		changed: make(chan struct{}, 1),
		started: make(chan struct{}),
		gate:    g,
		srv: webhook.NewServer(webhook.Options{
			Host: opts.Host, Port: opts.Port, CertDir: opts.CertDir, CertName: certFile, KeyName: keyFile,
			TLSOpts: tlsOpts,
		}),
	}
	validate := failWhenBusy(&admission.Webhook{Handler: &validator{lookup: s.lookupGroupKind, limits: opts.Limits, gate: g, pool: opts.Evaluators}})
	if opts.ClientCAFile != "" {
		validate = requireClientCert(validate)
	}
	s.Register(PathValidate, validate)
	s.Register(PathConvert, &converter{lookup: s.lookupGroupKind, limits: opts.Limits, gate: g, pool: opts.Evaluators}) // convert.go
	if err := mgr.Add(&configSync{s: s}); err != nil {
		return nil, err
	}
	return s, nil
}

// Register serves h at path with the same listener and certificate, within
// the server's Bounds; a conversion handler registers here ("/convert"),
// before the first SetTemplates.
func (s *Server) Register(path string, h http.Handler) { s.srv.Register(path, s.gate.wrap(h)) }

// SetTemplates hands the server a newly loaded set: the configuration
// follows it, and the server starts if a template needs it and it has not
// yet. It never blocks on the apiserver.
func (s *Server) SetTemplates(ctx context.Context, set *templates.Set) error {
	s.set.Store(set)
	select {
	case s.changed <- struct{}{}:
	default:
	}
	if !needsAdmission(set) && !needsConversion(set) {
		return nil
	}
	s.startOnce.Do(func() { s.startErr = s.start(ctx, set) })
	return s.startErr
}

func needsAdmission(set *templates.Set) bool {
	for _, t := range set.Templates() {
		if t.NeedsAdmission() {
			return true
		}
	}
	return false
}

// start adds the certificates' keepers and the listener to the manager.
func (s *Server) start(ctx context.Context, set *templates.Set) error {
	var written chan struct{}
	if s.opts.CertManagerCertificate == "" {
		if err := s.addRotator(ctx, set); err != nil {
			return err
		}
		written = make(chan struct{})
		files := &certFiles{
			reader:   s.direct,
			key:      types.NamespacedName{Namespace: s.opts.Namespace, Name: s.opts.SecretName},
			dir:      s.opts.CertDir,
			interval: s.opts.CertPoll,
			written:  written,
		}
		if err := s.mgr.Add(files); err != nil {
			return err
		}
	}
	return s.mgr.Add(&listener{s: s, written: written})
}

// listener starts the webhook server once the certificate files exist.
type listener struct {
	s       *Server
	written <-chan struct{} // the Secret's certificate copied; nil under cert-manager
}

func (l *listener) NeedLeaderElection() bool { return false }

func (l *listener) Start(ctx context.Context) error {
	cert := filepath.Join(l.s.opts.CertDir, certFile)
	if l.written != nil {
		select {
		case <-ctx.Done():
			return nil
		case <-l.written:
		}
	}
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(context.Context) (bool, error) {
		_, err := os.Stat(cert)
		return err == nil, nil
	})
	if err != nil {
		return nil // stopped before the certificate came
	}
	ctrl.LoggerFrom(ctx).Info("starting the webhook server", "port", l.s.opts.Port, "certificate", cert)
	errc := make(chan error, 1)
	go func() { errc <- l.s.srv.Start(ctx) }()
	if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		select {
		case err := <-errc:
			return false, err
		default:
		}
		return l.s.srv.StartedChecker()(nil) == nil, nil
	}); err != nil {
		if errors.Is(err, context.Canceled) {
			return <-errc
		}
		return fmt.Errorf("webhook server: %w", err)
	}
	close(l.s.started)
	return <-errc
}

// configSync keeps the ValidatingWebhookConfiguration in line with the
// latest set: applied once this replica's server listens, deleted when
// no template needs it. The leader writes it.
type configSync struct{ s *Server }

func (c *configSync) NeedLeaderElection() bool { return true }

func (c *configSync) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("webhook-configuration")
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-c.s.changed:
		}
		set := c.s.set.Load()
		if needsAdmission(set) {
			select {
			case <-ctx.Done():
				return nil
			case <-c.s.started:
			}
		}
		err := wait.ExponentialBackoffWithContext(ctx, wait.Backoff{Duration: time.Second, Factor: 2, Steps: 8, Cap: time.Minute}, func(ctx context.Context) (bool, error) {
			if err := c.s.opts.syncConfiguration(ctx, c.s.direct, set); err != nil {
				log.Error(err, "syncing the webhook configuration", "configuration", c.s.opts.ConfigurationName)
				return false, nil
			}
			return true, nil
		})
		if err != nil && ctx.Err() == nil {
			// Retried on the next set; say so where users see it.
			log.Error(err, "gave up syncing the webhook configuration until the next template change", "configuration", c.s.opts.ConfigurationName)
		}
	}
}

// verifyClientCA is the TLS option of Options.ClientCAFile: a client
// certificate, if one is given, signed by the CA in path, or no answer.
// Which paths require one is requireClientCert's.
func verifyClientCA(path string) (func(*tls.Config), error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the webhook's client CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("the webhook's client CA %s holds no PEM certificate", path)
	}
	return func(c *tls.Config) {
		c.ClientCAs = pool
		c.ClientAuth = tls.VerifyClientCertIfGiven
	}, nil
}

// requireClientCert serves h only to a client whose certificate the TLS
// handshake verified (verifyClientCA); others get 403.
func requireClientCert(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
			http.Error(w, "a client certificate signed by --webhook-client-ca-file is required", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}
