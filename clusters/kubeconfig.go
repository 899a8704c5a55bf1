package clusters

import (
	"errors"
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// RESTConfig reads a kubeconfig that carries its credentials inline and
// returns the config of its current context. A kubeconfig that would run
// a command or read a file on the engine's disk is refused: a cluster
// Secret is all the engine needs to reach the cluster, and nothing in it
// runs in the engine's process.
func RESTConfig(data []byte) (*rest.Config, error) {
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return nil, fmt.Errorf("not a kubeconfig: %w", err)
	}
	name := cfg.CurrentContext
	if name == "" && len(cfg.Contexts) == 1 {
		for n := range cfg.Contexts {
			name = n
		}
	}
	ctx, ok := cfg.Contexts[name]
	if !ok {
		return nil, errors.New("the kubeconfig names no current context (set current-context, or keep exactly one context)")
	}
	cluster, ok := cfg.Clusters[ctx.Cluster]
	if !ok {
		return nil, fmt.Errorf("context %q names cluster %q, which the kubeconfig does not define", name, ctx.Cluster)
	}
	user, ok := cfg.AuthInfos[ctx.AuthInfo]
	if !ok {
		return nil, fmt.Errorf("context %q names user %q, which the kubeconfig does not define", name, ctx.AuthInfo)
	}
	switch {
	case cluster.CertificateAuthority != "":
		return nil, fmt.Errorf("cluster %q reads certificate-authority from a file (%s): put it inline as certificate-authority-data", ctx.Cluster, cluster.CertificateAuthority)
	case user.Exec != nil:
		return nil, fmt.Errorf("user %q runs a command (exec: %s) for its credentials: the engine runs no command from a cluster Secret; use a token or a client certificate", ctx.AuthInfo, user.Exec.Command)
	case user.AuthProvider != nil:
		return nil, fmt.Errorf("user %q uses the auth-provider %q: the engine runs no credential plugin from a cluster Secret; use a token or a client certificate", ctx.AuthInfo, user.AuthProvider.Name)
	case user.ClientCertificate != "" || user.ClientKey != "":
		return nil, fmt.Errorf("user %q reads its client certificate or key from a file: put them inline as client-certificate-data and client-key-data", ctx.AuthInfo)
	case user.TokenFile != "":
		return nil, fmt.Errorf("user %q reads its token from a file (%s): put it inline as token", ctx.AuthInfo, user.TokenFile)
	}
	rc, err := clientcmd.NewNonInteractiveClientConfig(*cfg, name, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("context %q: %w", name, err)
	}
	return rc, nil
}
