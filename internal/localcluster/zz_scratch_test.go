package localcluster

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestScratchInspect(t *testing.T) {
	if os.Getenv("SCRATCH") == "" {
		t.Skip()
	}
	os.RemoveAll("/tmp/lc-inspect")
	c, err := Start(t.Context(), Options{Full: true, Dir: "/tmp/lc-inspect", Progress: os.Stderr})
	require.NoError(t, err)
	cs := clientset(t, c.Config)
	for i := 0; i < 10; i++ {
		time.Sleep(10 * time.Second)
		n, err := cs.CoreV1().Nodes().Get(t.Context(), nodeName, metav1.GetOptions{})
		require.NoError(t, err)
		t.Logf("%ds ready=%v taints=%v", (i+1)*10, nodeReady(n), n.Spec.Taints)
	}
	start := time.Now()
	require.NoError(t, c.Stop())
	t.Logf("stop took %s", time.Since(start))
}
