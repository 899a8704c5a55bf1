package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/pflag"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/cuengine/engine/engine"
	"github.com/cuengine/engine/evaluator"
	"github.com/cuengine/engine/render"
	"github.com/cuengine/engine/templates"
	"github.com/cuengine/engine/templates/rbac"
	"github.com/cuengine/engine/webhooks"
)

// defaultCertDir is where the serving certificate is written by default.
var defaultCertDir = filepath.Join(os.TempDir(), "engine-webhook-certs")

// webhookOptions are the flags of the webhook server (docs/operations.md,
// Admission webhook).
type webhookOptions struct {
	port          int
	certDir       string
	namespace     string
	secret        string
	service       string
	servicePort   int
	url           string
	configuration string
	failurePolicy string
	timeout       time.Duration
	certManager   string
	clientCA      string
	maxBytes      int64
	maxInFlight   int
	maxPerKind    int
	maxEvaluating int
}

// devWebhookPort is the webhook's port under engine dev.
const devWebhookPort = 9443

func (w *webhookOptions) addFlags(f *pflag.FlagSet) {
	f.IntVar(&w.port, "webhook-port", 0, "port of the webhook server, started when a template has spec constraints the CRD cannot carry (0, the default outside the chart and config/: never; engine dev uses 9443)")
	f.StringVar(&w.certDir, "webhook-cert-dir", defaultCertDir, "directory of the webhook's serving certificate (tls.crt, tls.key): written from --webhook-secret, or mounted with --webhook-cert-manager-certificate")
	f.StringVar(&w.namespace, "webhook-namespace", "", `namespace of the webhook's Secret and Service (default: the pod's namespace, else "default")`)
	f.StringVar(&w.secret, "webhook-secret", "engine-webhook-certs", "Secret holding the webhook's CA and serving certificate, created and rotated by the engine")
	f.StringVar(&w.service, "webhook-service", "engine-webhook", "Service through which the apiserver calls the webhook")
	f.IntVar(&w.servicePort, "webhook-service-port", 443, "port of --webhook-service")
	f.StringVar(&w.url, "webhook-url", "", `base URL through which the apiserver calls the webhook, instead of the Service ("https://localhost:9443" under engine dev)`)
	f.StringVar(&w.configuration, "webhook-configuration", "engine.cuengine.dev", "name of the ValidatingWebhookConfiguration the engine manages")
	f.StringVar(&w.failurePolicy, "webhook-failure-policy", "Fail", `what the apiserver does with a create or update of a checked parent while the engine does not answer: "Fail" refuses it, "Ignore" lets it in unchecked (deletes never wait on the engine)`)
	f.DurationVar(&w.timeout, "webhook-timeout", 5*time.Second, "how long the apiserver waits for the webhook (1s to 30s)")
	f.StringVar(&w.clientCA, "webhook-client-ca-file", "", "CA file (PEM) of the client certificates the webhook server verifies: /validate serves only a client presenting one it signed (the apiserver, with an --admission-control-config-file whose webhook kubeconfig has a client certificate); /convert also serves clients with none, as the apiserver sends conversions without one (docs/operations.md, Who can reach the port)")
	f.Int64Var(&w.maxBytes, "webhook-max-request-bytes", webhooks.DefaultMaxRequestBytes, "largest webhook request body read; a larger one is refused (413) before it is read")
	f.IntVar(&w.maxInFlight, "webhook-max-in-flight", 0, "webhook requests read and decoded at once; more wait up to 2s, then get 429 (0: GOMAXPROCS, at least 2)")
	f.IntVar(&w.maxPerKind, "webhook-max-per-kind", 0, "conversions and validations of one kind evaluated at once, a slot held until the evaluation ends (past --evaluation-timeout too); 64 times as many objects wait up to 10s each, more get 429 (0: --webhook-max-in-flight, at least 2)")
	f.IntVar(&w.maxEvaluating, "webhook-max-evaluating", 0, "objects of webhook requests evaluated at once in the engine's own process over every kind (with evaluator processes, only those for which no process is free at once), so that no load on the port takes more of the engine's CPUs than this; the others wait their turn in order, up to 10s, then fail (0: half of GOMAXPROCS, at least 1)")
	f.StringVar(&w.certManager, "webhook-cert-manager-certificate", "", `cert-manager Certificate ("namespace/name") whose Secret is mounted in --webhook-cert-dir: the engine does not rotate, and cert-manager's cainjector fills the caBundle`)
}

// dev points the webhook at this machine: the local cluster's apiserver
// calls https://localhost:<port>, the Secret lives in "default", the
// certificate in the dev directory. Flags given on the command line win.
func (w *webhookOptions) dev(dir string) {
	if w.port == 0 {
		w.port = devWebhookPort
	}
	if w.url == "" {
		w.url = fmt.Sprintf("https://localhost:%d", w.port)
	}
	if w.namespace == "" {
		w.namespace = "default"
	}
	if w.certDir == defaultCertDir {
		w.certDir = filepath.Join(dir, "webhook-certs")
	}
}

// hooks is the webhook server of `engine run`, nil when disabled.
type hooks struct{ srv *webhooks.Server }

// server builds the webhook server and hands it the first set.
func (w *webhookOptions) server(ctx context.Context, mgr manager.Manager, set *templates.Set, limits render.Limits, evaluators *evaluator.Pool) (*hooks, error) {
	if w.port == 0 {
		return &hooks{}, nil
	}
	policy := admissionregistrationv1.FailurePolicyType(w.failurePolicy)
	if policy != admissionregistrationv1.Fail && policy != admissionregistrationv1.Ignore {
		return nil, &exitError{code: 2, msg: fmt.Sprintf(`--webhook-failure-policy must be "Fail" or "Ignore", not %q`, w.failurePolicy)}
	}
	if w.timeout < time.Second || w.timeout > 30*time.Second {
		return nil, &exitError{code: 2, msg: fmt.Sprintf("--webhook-timeout must be from 1s to 30s, not %s", w.timeout)}
	}
	srv, err := webhooks.New(mgr, webhooks.Options{
		Port:                   w.port,
		CertDir:                w.certDir,
		Namespace:              cmp.Or(w.namespace, podNamespace(), "default"),
		SecretName:             w.secret,
		Service:                w.service,
		ServicePort:            w.servicePort,
		URL:                    w.url,
		ConfigurationName:      w.configuration,
		FailurePolicy:          policy,
		Timeout:                w.timeout,
		CertManagerCertificate: w.certManager,
		RotationCheck:          12 * time.Hour,
		CertPoll:               10 * time.Second,
		Limits:                 limits,
		Evaluators:             evaluators,
		Bounds:                 webhooks.Bounds{MaxRequestBytes: w.maxBytes, MaxInFlight: w.maxInFlight, MaxPerKind: w.maxPerKind, MaxEvaluating: w.maxEvaluating},
		ClientCAFile:           w.clientCA,
	})
	if err != nil {
		return nil, err
	}
	if err := srv.SetTemplates(ctx, set); err != nil {
		return nil, err
	}
	return &hooks{srv: srv}, nil
}

// conversion is where the CRDs of kinds with several versions send their
// conversions: the webhook server's /convert, nil when it is off. The
// server is built after the engine: h is read when a CRD is installed,
// once the manager runs.
func (w *webhookOptions) conversion(h func() *hooks) engine.ConversionWebhook {
	if w.port == 0 {
		return nil
	}
	return func(ctx context.Context) (*apiextensionsv1.WebhookClientConfig, map[string]string, error) {
		hs := h()
		if hs == nil || hs.srv == nil {
			return nil, nil, fmt.Errorf("the webhook server is not built yet")
		}
		return hs.srv.ConversionWebhook(ctx)
	}
}

// serve hands the server the set the engine now serves (never a set the
// engine refused: a reload the live parents break keeps the last good
// one, and so does admission).
func (h *hooks) serve(ctx context.Context, set *templates.Set) {
	if h == nil || h.srv == nil || set == nil {
		return
	}
	if err := h.srv.SetTemplates(ctx, set); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "starting the webhook server")
	}
}

// addWebhookRBAC grants the webhook server what it writes: its
// ValidatingWebhookConfiguration (the rotator lists and watches them all;
// writes only to its own) and, in the engine's namespace (the first
// Role), its certificate Secret (listed and watched by the rotator's
// cache; written only by name).
func addWebhookRBAC(roles *rbac.Roles, configuration, secret string) {
	vwc := []string{"validatingwebhookconfigurations"}
	roles.ClusterRole.Rules = append(roles.ClusterRole.Rules,
		rbacv1.PolicyRule{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: vwc, Verbs: []string{"list", "watch", "create"}},
		rbacv1.PolicyRule{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: vwc, ResourceNames: []string{configuration}, Verbs: []string{"get", "update", "patch", "delete"}},
	)
	if len(roles.Roles) == 0 {
		return
	}
	roles.Roles[0].Rules = append(roles.Roles[0].Rules,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"list", "watch", "create"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{secret}, Verbs: []string{"get", "update", "patch"}},
	)
}
