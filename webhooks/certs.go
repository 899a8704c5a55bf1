package webhooks

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/templates"
)

// The files of the serving certificate in Options.CertDir, as the Secret
// (cert-controller's, or cert-manager's) names them.
const (
	certFile = "tls.crt"
	keyFile  = "tls.key"
)

// dnsName is the name the apiserver checks the serving certificate
// against: the URL's host, or the Service's name in cluster DNS.
func (o *Options) dnsName() (string, error) {
	if o.URL != "" {
		u, err := url.Parse(o.URL)
		if err != nil {
			return "", fmt.Errorf("webhook URL %q: %w", o.URL, err)
		}
		return u.Hostname(), nil
	}
	return o.Service + "." + o.Namespace + ".svc", nil
}

// addRotator adds cert-controller's rotator: it keeps a self-signed CA and
// a serving certificate in the Secret (created empty here when missing),
// renews them before they expire, and injects the CA into the
// configuration's caBundle, and into the conversion webhook of the CRDs
// of the set's kinds with several versions, whenever either changes.
// Every replica runs it (the certificate is everyone's); writes to the
// Secret are guarded by its resourceVersion.
func (s *Server) addRotator(ctx context.Context, set *templates.Set) error {
	if err := s.ensureSecret(ctx); err != nil {
		return err
	}
	dns, err := s.opts.dnsName()
	if err != nil {
		return err
	}
	cr := &rotator.CertRotator{
		SecretKey:              types.NamespacedName{Namespace: s.opts.Namespace, Name: s.opts.SecretName},
		CertDir:                s.opts.CertDir,
		CAName:                 "engine-webhook-ca",
		CAOrganization:         "cuengine",
		DNSName:                dns,
		IsReady:                make(chan struct{}),
		Webhooks:               append([]rotator.WebhookInfo{{Name: s.opts.ConfigurationName, Type: rotator.Validating}}, conversionCRDs(set)...),
		FieldOwner:             "engine-cert-rotator",
		RequireLeaderElection:  false,
		RotationCheckFrequency: s.opts.RotationCheck,
		ControllerName:         "engine-cert-rotator",
	}
	if err := rotator.AddRotator(s.mgr, cr); err != nil {
		return fmt.Errorf("adding the certificate rotator: %w", err)
	}
	return nil
}

func (s *Server) ensureSecret(ctx context.Context) error {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
		Namespace: s.opts.Namespace, Name: s.opts.SecretName,
		Labels: map[string]string{contract.LabelManagedBy: contract.ManagedByValue},
	}}
	err := s.direct.Create(ctx, secret)
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the webhook certificate Secret %s/%s: %w", s.opts.Namespace, s.opts.SecretName, err)
	}
	return nil
}

// certFiles copies the Secret's serving certificate into CertDir, at
// start and then every Options.CertPoll, so the server (whose certificate
// watcher reloads the files) serves a rotated certificate within that
// time, in a pod (no wait for the kubelet to refresh a Secret volume) and
// under engine dev alike.
type certFiles struct {
	reader   client.Reader
	key      types.NamespacedName
	dir      string
	interval time.Duration
	// written is closed once the Secret's certificate is in dir: files
	// left by an earlier run are not served before.
	written chan struct{}
}

var _ manager.Runnable = (*certFiles)(nil)

func (f *certFiles) NeedLeaderElection() bool { return false }

func (f *certFiles) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("webhook-certs")
	if err := os.MkdirAll(f.dir, 0o700); err != nil {
		return fmt.Errorf("webhook certificate directory: %w", err)
	}
	// Every half second until the rotator has issued a certificate, then
	// every interval.
	first := true
	for {
		wait := f.interval
		if first {
			wait = 500 * time.Millisecond
			if f.copy(ctx, log) {
				close(f.written)
				first = false
				wait = f.interval
			}
		} else {
			f.copy(ctx, log)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// copy writes the Secret's certificate into dir when it changed; it
// reports whether dir holds the Secret's certificate.
func (f *certFiles) copy(ctx context.Context, log logr.Logger) bool {
	secret := &corev1.Secret{}
	if err := f.reader.Get(ctx, f.key, secret); err != nil {
		log.Error(err, "reading the webhook certificate Secret", "secret", f.key.String())
		return false
	}
	cert, key := secret.Data[certFile], secret.Data[keyFile]
	if len(cert) == 0 || len(key) == 0 || len(secret.Data["ca.crt"]) == 0 {
		return false // not issued yet
	}
	for _, file := range []struct {
		name string
		data []byte
	}{{keyFile, key}, {certFile, cert}} {
		path := filepath.Join(f.dir, file.name)
		if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, file.data) {
			continue
		}
		if err := writeAtomic(path, file.data); err != nil {
			log.Error(err, "writing the webhook certificate", "file", path)
			return false
		}
		log.Info("webhook certificate written", "file", path)
	}
	return true
}

// writeAtomic replaces path with data in one rename.
func writeAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}
