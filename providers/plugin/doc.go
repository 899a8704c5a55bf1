// Package plugin runs a provider in a process of its own and talks to it
// over gRPC on a Unix socket.
//
// A plugin is an executable named engine-provider-<name> whose main calls
// Serve with its providers.Provider. The engine finds plugins in its
// --provider-dir (Discover), starts and supervises each (Plugin.Run: a
// private socket directory, a handshake with ProtocolVersion, restarts with
// backoff, the plugin's stderr in the engine's log; with Options.OnDemand
// the first start waits for the first call) and registers a Plugin,
// which implements providers.Provider by calling the process, in place of
// the provider itself. The reconciler cannot tell the difference: errors
// keep their providers.Error reason and retryability across the wire, every
// call carries the caller's deadline, and a plugin that is down answers
// ProviderUnavailable (retryable), so nothing is deleted or forgotten while
// it restarts.
//
// The messages are Go structs encoded as JSON by a codec of this package,
// forced on both ends (no protobuf schema, no generator): the payloads are
// JSON values already (a template's spec, a provider's state) and both ends
// are built from this package. ProtocolVersion changes when a message
// does.
//
// The package owns the wire and the process; it knows nothing of
// Kubernetes. It does not log a request or a response, so an observation's
// Sensitive outputs reach the reconciler and nothing else.
package plugin
