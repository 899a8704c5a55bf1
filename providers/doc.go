// Package providers is the plugin boundary for external resources: the
// Provider interface every provider implements, the error classification the
// engine acts on, and the registry keyed by a template's `provider:` name.
//
// Providers know nothing about Kubernetes objects or the engine: they receive
// the resource's spec, its recorded external name and its owner's identity,
// and manage one external resource idempotently.
package providers
