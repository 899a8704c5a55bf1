// Pins funlen, which `make lint` builds into bin/ from main.go. A module
// of its own, so that the engine's go.mod carries none of its dependencies.
module github.com/cuengine/engine/hack/tools/funlen

go 1.26.0

require (
	github.com/ultraware/funlen v0.2.0
	golang.org/x/tools v0.51.0
)

require (
	golang.org/x/mod v0.41.0 // indirect
	golang.org/x/sync v0.23.0 // indirect
)
