package main

import (
	"crypto/tls"
	"fmt"
	"net"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// metricsOptions are the flags of the Prometheus endpoint.
type metricsOptions struct {
	addr    string
	secure  bool
	certDir string
}

// The metrics endpoint's default addresses: every interface over HTTPS
// (Prometheus scrapes the pod's IP), loopback only over plain HTTP.
const (
	secureMetricsAddr   = ":8443"
	insecureMetricsAddr = "127.0.0.1:8080"
)

func (o *metricsOptions) addFlags(f *pflag.FlagSet) {
	f.StringVar(&o.addr, "metrics-bind-address", "", `address of the Prometheus metrics endpoint ("0" disables it; default: `+secureMetricsAddr+` with --metrics-secure, else `+insecureMetricsAddr+`)`)
	f.BoolVar(&o.secure, "metrics-secure", true, "serve metrics over HTTPS, only to clients whose bearer token the apiserver authenticates (TokenReview) and authorizes for GET /metrics (SubjectAccessReview); false serves plain HTTP to anyone who can connect, for engine dev and local use")
	f.StringVar(&o.certDir, "metrics-cert-dir", "", "directory holding tls.crt and tls.key of the metrics endpoint, reloaded when they change (default: a self-signed certificate made in memory at start)")
}

// bindAddress is the address to listen on.
func (o *metricsOptions) bindAddress() string {
	switch {
	case o.addr != "":
		return o.addr
	case o.secure:
		return secureMetricsAddr
	default:
		return insecureMetricsAddr
	}
}

// serverOptions are the manager's metrics server options. With secure, it
// serves TLS 1.2+ over HTTP/1.1 only (HTTP/2's stream handling has been the
// way into several denial-of-service advisories, as Kubebuilder's scaffold
// notes), behind controller-runtime's authentication and authorization
// filter; a missing certificate directory gets a self-signed certificate.
func (o *metricsOptions) serverOptions(log logr.Logger) metricsserver.Options {
	opts := metricsserver.Options{BindAddress: o.bindAddress()}
	if !o.secure {
		if opts.BindAddress != "0" && !loopback(opts.BindAddress) {
			log.Info("metrics are served over plain HTTP without authentication to anyone who can connect", "address", opts.BindAddress)
		}
		return opts
	}
	opts.SecureServing = true
	opts.FilterProvider = filters.WithAuthenticationAndAuthorization
	opts.CertDir = o.certDir
	opts.TLSOpts = []func(*tls.Config){func(c *tls.Config) {
		c.MinVersion = tls.VersionTLS12
		c.NextProtos = []string{"http/1.1"}
	}}
	return opts
}

// loopback reports whether addr listens on a loopback address only.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// validate refuses a certificate directory without HTTPS.
func (o *metricsOptions) validate() error {
	if o.certDir != "" && !o.secure {
		return fmt.Errorf("--metrics-cert-dir needs --metrics-secure")
	}
	return nil
}
