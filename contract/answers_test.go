package contract

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestPlainAnswerCutsTheBody: what client-go makes of a 500 with an HTML
// page (rest.Request's transformResponse, for a body that does not decode
// as a Status) loses the page and keeps the status line and the context
// around it; the error is still an InternalError; a Status the apiserver
// sent itself is left alone.
func TestPlainAnswerCutsTheBody(t *testing.T) {
	page := "<html><body>upstream db01.internal:5432 password=hunter2</body></html>"
	se := apierrors.NewGenericServerResponse(http.StatusInternalServerError, "GET", schema.GroupResource{Resource: "configmaps"}, "", page, 0, true)
	err := fmt.Errorf("cluster %q is unreachable: %w", "west", se)
	assert.Contains(t, err.Error(), "hunter2", "the case: the body is in the text")

	got := PlainAnswer(err)
	assert.NotContains(t, got.Error(), "hunter2")
	assert.NotContains(t, got.Error(), "<html>")
	assert.Equal(t, `cluster "west" is unreachable: the server answered 500 Internal Server Error with a body that is not a Kubernetes Status (70 bytes, not shown; the engine logs it at debug level)`, got.Error())
	assert.True(t, apierrors.IsInternalError(got), "classed as before")
	assert.True(t, errors.Is(got, se))

	// An error whose text holds the StatusError's quoted, not verbatim:
	// the plain text alone.
	quoted := &wrapped{err: se}
	assert.Contains(t, quoted.Error(), "hunter2")
	assert.NotContains(t, PlainAnswer(quoted).Error(), "hunter2")

	// The apiserver's own Status: its message is the apiserver's, kept.
	own := apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "x", errors.New("RBAC: access denied"))
	assert.Same(t, error(own), PlainAnswer(own))
	assert.Nil(t, PlainAnswer(nil))
}

type wrapped struct{ err error }

func (w *wrapped) Error() string { return fmt.Sprintf("listing: %q", w.err.Error()) }
func (w *wrapped) Unwrap() error { return w.err }
