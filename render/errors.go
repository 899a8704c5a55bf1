package render

// Error is a rendering refused for a reason the parent's Synced condition
// names: a limit exceeded (contract.ReasonEvaluationTimeout,
// ReasonTooManyChildren, ReasonRenderTooLarge), returned by Render, or a
// child the template's policy refuses (contract.ReasonChildRefused), in
// Rendered.Refused. Retrying cannot help until the parent or the template
// changes: the reconciler classifies it terminal (reconciler/errors.go),
// with Reason as Synced's reason and Err's message as its message.
type Error struct {
	// Reason is the Synced condition's reason (a contract.Reason* constant).
	Reason string
	// Err says what was refused; its message is the condition's message.
	Err error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }
