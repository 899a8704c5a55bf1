package contract

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PlainAnswer is err with the body of a server's answer that was not a
// Kubernetes Status cut from its text: a proxy's or load balancer's error
// page, or anything else a cluster's address answers with. client-go puts
// such a body into the error's message (apierrors.NewGenericServerResponse,
// "an error on the server (\"...\")") and its StatusCause; copied into a
// condition it would show whoever may read the parent what another
// server said, unbounded. The text keeps the HTTP status line and says
// the body's size; the error still unwraps to the original, so that it is
// classed as before, and the caller logs the original at debug level.
// Any other error is returned as it is.
func PlainAnswer(err error) error {
	var se *apierrors.StatusError
	if err == nil || !errors.As(err, &se) || !apierrors.IsUnexpectedServerError(se) {
		return err
	}
	body := 0
	for _, c := range se.ErrStatus.Details.Causes {
		if c.Type == metav1.CauseTypeUnexpectedServerResponse {
			body = len(c.Message)
		}
	}
	code := int(se.ErrStatus.Code)
	plain := fmt.Sprintf("the server answered %d %s with a body that is not a Kubernetes Status (%d bytes, not shown; the engine logs it at debug level)", code, http.StatusText(code), body)
	full := err.Error()
	msg := strings.Replace(full, se.Error(), plain, 1)
	if msg == full { // the StatusError's text was not kept as is by a wrapper
		msg = plain
	}
	return &plainAnswer{msg: msg, err: err}
}

type plainAnswer struct {
	msg string
	err error
}

func (e *plainAnswer) Error() string { return e.msg }
func (e *plainAnswer) Unwrap() error { return e.err }
