// Package webhooks is the engine's HTTPS server for the apiserver's calls:
// the validating admission of parents (validate.go) and the conversion of
// parents between the versions of their kind (convert.go).
//
// It owns:
//
//   - server.go: Options, New and the Runnables it adds to a manager (the
//     controller-runtime webhook server, started once its certificate is
//     on disk); Register, the one door for another handler (a /convert
//     handler registers here and is served with the same certificate);
//     SetTemplates, which hands it each newly loaded set.
//   - bounds.go: what the port may cost, whoever calls: the body's size,
//     the requests read at once, the evaluations of each kind, the share
//     of the engine's CPUs for those in its process.
//   - validate.go: the /validate handler: a created or updated parent
//     evaluated against its template's CUE schema; a refusal names the CUE
//     error's field path, message and file:line. A validation the engine
//     has no room for fails the call (failWhenBusy), for the apiserver's
//     failurePolicy to decide.
//   - configuration.go: the ValidatingWebhookConfiguration it manages, one
//     rule per kind whose template has constraints the CRD does not carry
//     (templates.Template.NeedsAdmission), deleted when none has.
//   - convert.go: the /convert handler: a ConversionReview's objects
//     converted with the CUE of their template's versions block, through
//     render.Convert and render.ConvertBatch (the engine's evaluation
//     limits; in the evaluator processes when there are); one failure fails
//     the review, naming the object and the field. ConversionWebhook: the
//     clientConfig (and CA) the engine writes into such a CRD.
//   - certs.go: the serving certificate: a self-signed CA and serving
//     certificate kept in a Secret of the engine's namespace, rotated by
//     open-policy-agent/cert-controller, which injects the CA as the
//     caBundle of the configuration and of the converting CRDs; the
//     Secret's certificate written to the server's directory. Or, with
//     cert-manager, a mounted certificate and the cainjector's annotation.
//
// It does not load templates or reconcile: it is handed compiled sets and
// asks render to validate or convert objects of a Template.
package webhooks
