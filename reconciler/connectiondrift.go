package reconciler

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/providers"
	"github.com/cuengine/engine/templates"
)

// driftRetry is when a parent whose connection Secret was put right is
// looked at again, if the watch event of the write has not brought it
// sooner: Ready waits for a reconcile that finds the Secret as written.
const driftRetry = 2 * time.Second

// secretSums are keyed hashes of the values the engine wrote into a
// connection Secret, by key (contract.AnnotationConnectionSecretSums). The
// engine keeps no credential; these say whether a value is still the one
// it wrote, and nothing about the value.
type secretSums map[string]string

// valueSum is the HMAC-SHA256 of a key and its value, keyed by the
// parent's UID: the same password under two parents has two sums.
func valueSum(uid types.UID, key string, value []byte) string {
	m := hmac.New(sha256.New, []byte(uid))
	m.Write([]byte(key))
	m.Write([]byte{0})
	m.Write(value)
	return hex.EncodeToString(m.Sum(nil))
}

func (s secretSums) String() string {
	b, _ := json.Marshal(map[string]string(s)) // sorted keys: stable
	return string(b)
}

// recordedSums reads the sums on a live connection Secret; ok is false
// when it has none (written by an engine that kept none) or they cannot
// be read.
func recordedSums(secret *unstructured.Unstructured) (sums secretSums, ok bool) {
	v, found := secret.GetAnnotations()[contract.AnnotationConnectionSecretSums]
	if !found || json.Unmarshal([]byte(v), &sums) != nil {
		return nil, false
	}
	return sums, true
}

// secretDrift is what someone else changed in a connection Secret the
// engine wrote: its keys whose value is not the one written (changed or
// removed), and its type when it is not Opaque.
type secretDrift struct {
	keys []string
	typ  string
}

func (d secretDrift) none() bool { return len(d.keys) == 0 && d.typ == "" }

// String names what drifted, never a value: "keys password, uri".
func (d secretDrift) String() string {
	var parts []string
	switch len(d.keys) {
	case 0:
	case 1:
		parts = append(parts, "key "+d.keys[0])
	default:
		parts = append(parts, "keys "+strings.Join(d.keys, ", "))
	}
	if d.typ != "" {
		parts = append(parts, fmt.Sprintf("type (%s, not %s)", d.typ, corev1.SecretTypeOpaque))
	}
	return strings.Join(parts, " and ")
}

// connectionSecretDrift compares the live Secret (the parent's, or nil)
// with the sums the engine recorded on it.
func connectionSecretDrift(parent, secret *unstructured.Unstructured) secretDrift {
	var d secretDrift
	if secret == nil {
		return d
	}
	if t, _ := secret.Object["type"].(string); t != "" && t != string(corev1.SecretTypeOpaque) {
		d.typ = t
	}
	sums, ok := recordedSums(secret)
	if !ok {
		return d
	}
	data, _ := secret.Object["data"].(map[string]any)
	for _, k := range slices.Sorted(maps.Keys(sums)) {
		v, _ := data[k].(string)
		dec, err := base64.StdEncoding.DecodeString(v)
		if _, present := data[k]; !present || err != nil || !hmac.Equal([]byte(valueSum(parent.GetUID(), k, dec)), []byte(sums[k])) {
			d.keys = append(d.keys, k)
		}
	}
	return d
}

// confirmDrift compares the live connection Secret with the sums the
// engine recorded on it. Drift seen in the cache is confirmed on the
// apiserver, which returns the Secret to use: a cache that has not shown
// the engine's last write yet must not make it reset the credentials a
// second time.
func (r *Reconciler) confirmDrift(ctx context.Context, parent, secret *unstructured.Unstructured) (*unstructured.Unstructured, secretDrift, error) {
	drift := connectionSecretDrift(parent, secret)
	if drift.none() {
		return secret, drift, nil
	}
	cur := &unstructured.Unstructured{}
	cur.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	err := r.live.Get(ctx, client.ObjectKeyFromObject(secret), cur)
	switch {
	case apierrors.IsNotFound(err):
		return secret, drift, nil // gone meanwhile: the next reconcile finds it lost
	case err != nil:
		return nil, drift, fmt.Errorf("reading connection Secret %s: %w", secret.GetName(), err)
	case cur.GetUID() != secret.GetUID():
		return secret, drift, nil
	}
	return cur, connectionSecretDrift(parent, cur), nil
}

// dropConnectionSecret deletes the parent's connection Secret whose type
// someone else changed: a Secret's type cannot be changed back, so it is
// written anew, with new credentials.
func (r *Reconciler) dropConnectionSecret(ctx context.Context, secret *unstructured.Unstructured) error {
	uid := secret.GetUID()
	err := r.writer.Delete(ctx, secret, client.Preconditions{UID: &uid})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting connection Secret %s, whose type was changed: %w", secret.GetName(), err)
	}
	return nil
}

// putRight follows a successful Apply of a resource whose connection
// Secret drifted. The keys the observation gives are restored by it; any
// other drifted key holds a credential the engine does not keep, so the
// credentials are reset with the provider. The drift is a problem of this
// reconcile either way (the parent is not Ready until a reconcile finds
// the Secret as written), with its event. It returns the sensitive outputs
// to write.
func (r *Reconciler) putRight(ctx context.Context, p providers.Provider, req providers.Request, res templates.Resource, drift secretDrift, sensitive map[string][]byte, st *status) map[string][]byte {
	what := fmt.Sprintf("resource %s: connection Secret %s: %s changed by someone else", res.Name, res.ConnectionSecret, drift)
	repair := "restored"
	restorable := !slices.ContainsFunc(drift.keys, func(k string) bool { _, ok := sensitive[k]; return !ok })
	switch {
	case req.ResetCredentials:
		repair = "new credentials were set"
	case drift.typ != "" || !restorable:
		req.ResetCredentials = true
		callCtx, cancel := context.WithTimeout(ctx, providerCallTimeout)
		obs, err := p.Apply(callCtx, req)
		cancel()
		if err != nil {
			st.fail(contract.ReasonConnectionSecretDrifted, fmt.Errorf("%s; resetting the credentials failed: %w", what, err))
			return sensitive
		}
		sensitive, repair = obs.Sensitive, "new credentials were set"
	}
	st.fail(contract.ReasonConnectionSecretDrifted, waitingError(contract.ReasonConnectionSecretDrifted, driftRetry, fmt.Errorf("%s; %s", what, repair)))
	return sensitive
}
