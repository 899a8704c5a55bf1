package clusters

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cuengine/engine/contract"
)

// kubeconfig is a kubeconfig for server whose user section is user.
func kubeconfig(server, user string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
current-context: c
contexts:
- name: c
  context: {cluster: k, user: u}
clusters:
- name: k
  cluster: {server: %q, insecure-skip-tls-verify: true}
users:
- name: u
  user: %s
`, server, user)
}

func TestRESTConfigTakesInlineCredentials(t *testing.T) {
	cfg, err := RESTConfig([]byte(kubeconfig("https://10.0.0.1:6443", "{token: abc}")))
	require.NoError(t, err)
	assert.Equal(t, "https://10.0.0.1:6443", cfg.Host)
	assert.Equal(t, "abc", cfg.BearerToken)
}

// TestRESTConfigRefusesWhatRunsOrReadsFiles: nothing in a cluster Secret
// runs a command in the engine's process or reads its disk.
func TestRESTConfigRefusesWhatRunsOrReadsFiles(t *testing.T) {
	for _, tc := range []struct{ user, want string }{
		{`{exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/steal}}`,
			`user "u" runs a command (exec: /bin/steal) for its credentials: the engine runs no command from a cluster Secret; use a token or a client certificate`},
		{`{auth-provider: {name: gcp}}`,
			`user "u" uses the auth-provider "gcp": the engine runs no credential plugin from a cluster Secret; use a token or a client certificate`},
		{`{tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token}`,
			`user "u" reads its token from a file (/var/run/secrets/kubernetes.io/serviceaccount/token): put it inline as token`},
		{`{client-certificate: /etc/cert.pem, client-key: /etc/key.pem}`,
			`user "u" reads its client certificate or key from a file: put them inline as client-certificate-data and client-key-data`},
	} {
		_, err := RESTConfig([]byte(kubeconfig("https://10.0.0.1:6443", tc.user)))
		require.Error(t, err, tc.user)
		assert.Equal(t, tc.want, err.Error())
	}
	_, err := RESTConfig([]byte("apiVersion: v1\nkind: Config\n"))
	assert.EqualError(t, err, "the kubeconfig names no current context (set current-context, or keep exactly one context)")
	_, err = RESTConfig([]byte("{{"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not a kubeconfig")
}

func clusterSecret(name, cluster, rv string, data string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "engine-system", Name: name, ResourceVersion: rv,
		Labels: map[string]string{contract.LabelCluster: cluster}}}
	if data != "" {
		s.Data = map[string][]byte{contract.KeyKubeconfig: []byte(data)}
	}
	return s
}

// TestTargetsOfSecrets: each Secret is a target, or a target with the
// reason it cannot be used; two Secrets for one name are both refused.
func TestTargetsOfSecrets(t *testing.T) {
	good := kubeconfig("https://west:6443", "{token: abc}")
	ts := targetsOf([]*corev1.Secret{
		clusterSecret("west", "west", "7", good),
		clusterSecret("east-a", "east", "8", good),
		clusterSecret("east-b", "east", "9", good),
		clusterSecret("bad", "Bad_Name", "10", good),
		clusterSecret("empty", "north", "11", ""),
	})
	require.Len(t, ts, 4)
	assert.Equal(t, "Bad_Name", ts[0].Name)
	assert.EqualError(t, ts[0].Err, `Secret engine-system/bad: cluster name "Bad_Name" is not a DNS label (lower case letters, digits and '-', at most 63)`)
	assert.Equal(t, "east", ts[1].Name)
	assert.EqualError(t, ts[1].Err, `cluster "east" is registered by 2 Secrets (east-a, east-b): keep one`)
	assert.Equal(t, "8,9", ts[1].Version)
	assert.EqualError(t, ts[2].Err, `Secret engine-system/empty has no "kubeconfig" key`)
	assert.Equal(t, "west", ts[3].Name)
	require.NoError(t, ts[3].Err)
	assert.Equal(t, "https://west:6443", ts[3].Config.Host)
	assert.Equal(t, "Secret engine-system/west", ts[3].Origin)
	assert.Equal(t, "7", ts[3].Version)
}
