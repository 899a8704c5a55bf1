package main

import (
	"testing"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
)

// TestMetricsOptions: HTTPS behind authentication by default, on every
// interface; plain HTTP only when asked, on loopback unless given an
// address.
func TestMetricsOptions(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   metricsOptions
		addr   string
		secure bool
		err    string
	}{
		{name: "default", opts: metricsOptions{secure: true}, addr: ":8443", secure: true},
		{name: "secure, an address", opts: metricsOptions{secure: true, addr: "10.0.0.1:9443"}, addr: "10.0.0.1:9443", secure: true},
		{name: "secure, a certificate", opts: metricsOptions{secure: true, certDir: "/certs"}, addr: ":8443", secure: true},
		{name: "plain", opts: metricsOptions{}, addr: "127.0.0.1:8080"},
		{name: "plain, an address", opts: metricsOptions{addr: ":8080"}, addr: ":8080"},
		{name: "disabled", opts: metricsOptions{secure: true, addr: "0"}, addr: "0", secure: true},
		{name: "plain with a certificate", opts: metricsOptions{certDir: "/certs"}, err: "--metrics-cert-dir needs --metrics-secure"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.opts.validate()
			if tc.err != "" {
				assert.EqualError(t, err, tc.err)
				return
			}
			assert.NoError(t, err)
			s := tc.opts.serverOptions(logr.Discard())
			assert.Equal(t, tc.addr, s.BindAddress)
			assert.Equal(t, tc.secure, s.SecureServing)
			assert.Equal(t, tc.secure, s.FilterProvider != nil, "authentication and authorization with HTTPS")
			assert.Equal(t, tc.opts.certDir, s.CertDir)
		})
	}
}

func TestLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "localhost:8080": true, "[::1]:8080": true,
		":8080": false, "0.0.0.0:8080": false, "10.1.2.3:8080": false, "nonsense": false,
	} {
		assert.Equal(t, want, loopback(addr), addr)
	}
}
