package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/rollout"
	"github.com/cuengine/engine/rollout/analysis"
)

// prometheusOptions are the flags of the Prometheus server the rollouts'
// analysis checks query (rollout.analysis in a template).
type prometheusOptions struct {
	url     string
	secret  string
	timeout time.Duration
}

func (o *prometheusOptions) addFlags(f *pflag.FlagSet) {
	f.StringVar(&o.url, "prometheus-url", "", `address of the Prometheus server the rollouts' analysis checks query ("http://prometheus.monitoring:9090"); none: a wave whose template declares checks holds`)
	f.StringVar(&o.secret, "prometheus-secret", "", `NAMESPACE/NAME of a Secret with the Prometheus credentials: "token" (a bearer token), or "username" and "password" (read once at start)`)
	f.DurationVar(&o.timeout, "prometheus-timeout", 10*time.Second, "how long one analysis query may take; one that takes longer holds its wave")
}

// analyzer returns the Prometheus client the rollouts' analysis checks
// run on, nil without --prometheus-url. The credentials go to the client
// only: never to a log, an error or a status.
func (o *prometheusOptions) analyzer(ctx context.Context, cfg *rest.Config) (rollout.Analyzer, error) {
	if o.url == "" {
		if o.secret != "" {
			return nil, &exitError{code: 2, msg: "--prometheus-secret needs --prometheus-url"}
		}
		return nil, nil
	}
	var creds analysis.Credentials
	if o.secret != "" {
		var err error
		if creds, err = o.credentials(ctx, cfg); err != nil {
			return nil, err
		}
	}
	s, err := analysis.NewServer(o.url, creds, o.timeout)
	if err != nil {
		return nil, &exitError{code: 2, msg: "--prometheus-url: " + err.Error()}
	}
	return s, nil
}

// credentials reads the Secret --prometheus-secret names.
func (o *prometheusOptions) credentials(ctx context.Context, cfg *rest.Config) (analysis.Credentials, error) {
	ns, name, ok := strings.Cut(o.secret, "/")
	if !ok || ns == "" || name == "" {
		return analysis.Credentials{}, &exitError{code: 2, msg: fmt.Sprintf("--prometheus-secret %q: write NAMESPACE/NAME", o.secret)}
	}
	c, err := client.New(cfg, client.Options{Scheme: newScheme()})
	if err != nil {
		return analysis.Credentials{}, err
	}
	s := &corev1.Secret{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, s); err != nil {
		return analysis.Credentials{}, fmt.Errorf("--prometheus-secret: reading Secret %s: %w", o.secret, err)
	}
	creds := analysis.Credentials{Token: string(s.Data["token"]), Username: string(s.Data["username"]), Password: string(s.Data["password"])}
	switch {
	case creds.Token != "" && creds.Username != "":
		return analysis.Credentials{}, fmt.Errorf("--prometheus-secret: Secret %s has both a token and a username: keep one", o.secret)
	case creds.Token == "" && (creds.Username == "" || creds.Password == ""):
		return analysis.Credentials{}, fmt.Errorf("--prometheus-secret: Secret %s has neither a token nor a username and a password", o.secret)
	}
	return creds, nil
}
