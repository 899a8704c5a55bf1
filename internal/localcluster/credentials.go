package localcluster

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

const (
	// serviceCIDR is the Service cluster IP range; its first address is the
	// kubernetes Service, which the serving certificate names.
	serviceCIDR = "10.96.0.0/16"
	// kubernetesServiceIP is the first address of serviceCIDR.
	kubernetesServiceIP = "10.96.0.1"
	// loopback is the address every component binds to.
	loopback = "127.0.0.1"
	// clientQPS and clientBurst let the admin config go fast against a
	// local apiserver.
	clientQPS   = 1000
	clientBurst = 2000
)

// credentials are the files a hand-started apiserver needs, and the admin
// token it accepts.
type credentials struct {
	certFile  string // serving certificate followed by its CA, PEM
	keyFile   string // serving key, PEM
	caFile    string // the CA of the serving certificate alone, PEM
	saKeyFile string // service-account signing key, PEM
	tokenFile string // --token-auth-file
	token     string // admin bearer token
	caData    []byte // contents of caFile, to verify the apiserver
}

// writeCredentials generates a self-signed serving certificate for the
// apiserver, a service-account signing key and an admin token, and writes
// them under dir.
func writeCredentials(dir string) (*credentials, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating credentials directory: %w", err)
	}
	cr := &credentials{
		certFile:  filepath.Join(dir, "apiserver.crt"),
		keyFile:   filepath.Join(dir, "apiserver.key"),
		caFile:    filepath.Join(dir, "ca.crt"),
		saKeyFile: filepath.Join(dir, "service-account.key"),
		tokenFile: filepath.Join(dir, "tokens.csv"),
	}
	steps := []func() error{cr.writeServingCert, cr.writeServiceAccountKey, cr.writeToken}
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, err
		}
	}
	return cr, nil
}

// writeServingCert writes a self-signed certificate valid for the loopback
// address, localhost and the in-cluster names of the kubernetes Service.
func (cr *credentials) writeServingCert() error {
	ips := []net.IP{net.ParseIP(loopback), net.ParseIP(kubernetesServiceIP)}
	names := []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}
	cert, key, err := certutil.GenerateSelfSignedCertKey(loopback, ips, names)
	if err != nil {
		return fmt.Errorf("generating serving certificate: %w", err)
	}
	if err := os.WriteFile(cr.certFile, cert, 0o600); err != nil {
		return fmt.Errorf("writing serving certificate: %w", err)
	}
	if err := os.WriteFile(cr.keyFile, key, 0o600); err != nil {
		return fmt.Errorf("writing serving key: %w", err)
	}
	return cr.writeCA(cert)
}

// writeCA writes the CA certificates of bundle alone: kube-controller-manager
// publishes its root CA file as a ClusterTrustBundle, which takes only CAs.
func (cr *credentials) writeCA(bundle []byte) error {
	certs, err := certutil.ParseCertsPEM(bundle)
	if err != nil {
		return fmt.Errorf("parsing serving certificate: %w", err)
	}
	var ca []byte
	for _, c := range certs {
		if c.IsCA {
			ca = append(ca, pem.EncodeToMemory(&pem.Block{Type: certutil.CertificateBlockType, Bytes: c.Raw})...)
		}
	}
	if len(ca) == 0 {
		return errors.New("serving certificate bundle has no CA")
	}
	if err := os.WriteFile(cr.caFile, ca, 0o644); err != nil {
		return fmt.Errorf("writing CA certificate: %w", err)
	}
	cr.caData = ca
	return nil
}

// writeServiceAccountKey writes the key that signs service-account tokens.
func (cr *credentials) writeServiceAccountKey() error {
	key, err := keyutil.MakeEllipticPrivateKeyPEM()
	if err != nil {
		return fmt.Errorf("generating service-account key: %w", err)
	}
	if err := os.WriteFile(cr.saKeyFile, key, 0o600); err != nil {
		return fmt.Errorf("writing service-account key: %w", err)
	}
	return nil
}

// writeToken writes a token file with one random admin token in
// system:masters.
func (cr *credentials) writeToken() error {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return fmt.Errorf("generating admin token: %w", err)
	}
	cr.token = hex.EncodeToString(raw)
	line := cr.token + ",admin,admin,system:masters\n"
	if err := os.WriteFile(cr.tokenFile, []byte(line), 0o600); err != nil {
		return fmt.Errorf("writing token file: %w", err)
	}
	return nil
}

// restConfig returns an admin config for the apiserver at host.
func (cr *credentials) restConfig(host string) *rest.Config {
	return &rest.Config{
		Host:            host,
		BearerToken:     cr.token,
		TLSClientConfig: rest.TLSClientConfig{CAData: cr.caData},
		QPS:             clientQPS,
		Burst:           clientBurst,
	}
}

// writeKubeconfig writes a kubeconfig file equivalent to cfg, which must use
// a bearer token and CA data.
func writeKubeconfig(cfg *rest.Config, path string) error {
	const name = "localcluster"
	kc := clientcmdapi.Config{
		Clusters: map[string]*clientcmdapi.Cluster{
			name: {Server: cfg.Host, CertificateAuthorityData: cfg.CAData},
		},
		AuthInfos: map[string]*clientcmdapi.AuthInfo{
			"admin": {Token: cfg.BearerToken},
		},
		Contexts: map[string]*clientcmdapi.Context{
			name: {Cluster: name, AuthInfo: "admin", Namespace: "default"},
		},
		CurrentContext: name,
	}
	if err := clientcmd.WriteToFile(kc, path); err != nil {
		return fmt.Errorf("writing kubeconfig: %w", err)
	}
	return nil
}
