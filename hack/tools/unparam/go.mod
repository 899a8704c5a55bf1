// Pins unparam, built from the tool directive below, which `make lint`
// runs on every package outside bench/. A module of its own, so that the
// engine's go.mod carries none of its dependencies.
module github.com/cuengine/engine/hack/tools/unparam

go 1.26.0

tool mvdan.cc/unparam

require (
	golang.org/x/mod v0.39.0 // indirect
	golang.org/x/sync v0.22.0 // indirect
	golang.org/x/tools v0.49.0 // indirect
	mvdan.cc/unparam v0.0.0-20260823230713-2fa3d841b0c8 // indirect
)
