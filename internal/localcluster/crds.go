package localcluster

import (
	"context"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// crdTimeout bounds the wait for the CRDs to be Established.
const crdTimeout = 30 * time.Second

// installCRDs creates the CRDs and waits until each is Established.
func (c *Cluster) installCRDs(ctx context.Context, crds []*apiextensionsv1.CustomResourceDefinition, prog *progress) error {
	if len(crds) == 0 {
		return nil
	}
	client, err := apiextensionsclient.NewForConfig(c.Config)
	if err != nil {
		return fmt.Errorf("creating apiextensions client: %w", err)
	}
	crdClient := client.ApiextensionsV1().CustomResourceDefinitions()
	prog.printf("installing %d CRDs...", len(crds))
	for _, crd := range crds {
		crd = crd.DeepCopy()
		crd.ResourceVersion = ""
		if _, err := crdClient.Create(ctx, crd, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating CRD %s: %w", crd.Name, err)
		}
	}
	return prog.wait(ctx, waitSpec{
		what: "for the CRDs to be Established", done: "CRDs Established", timeout: crdTimeout,
		check: func(ctx context.Context) (bool, error) {
			for _, crd := range crds {
				got, err := crdClient.Get(ctx, crd.Name, metav1.GetOptions{})
				if err != nil {
					return false, fmt.Errorf("getting CRD %s: %w", crd.Name, err)
				}
				if !established(got) {
					return false, fmt.Errorf("CRD %s is not Established yet", crd.Name)
				}
			}
			return true, nil
		},
		alive: c.alive,
	})
}

// established reports whether crd has condition Established True.
func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, cond := range crd.Status.Conditions {
		if cond.Type == apiextensionsv1.Established {
			return cond.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}
