// Pins unparam, built from the tool directive below. A module of its own,
// so that the engine's go.mod carries none of its dependencies. Not in
// `make lint` yet: it has findings to fix first (issue 52, item 4). Run
// it from the repository's root:
//
//	(cd hack/tools/unparam && go build -o ../../../bin/unparam mvdan.cc/unparam) && bin/unparam ./...
module github.com/cuengine/engine/hack/tools/unparam

go 1.26.0

tool mvdan.cc/unparam

require (
	golang.org/x/mod v0.39.0 // indirect
	golang.org/x/sync v0.22.0 // indirect
	golang.org/x/tools v0.49.0 // indirect
	mvdan.cc/unparam v0.0.0-20260823230713-2fa3d841b0c8 // indirect
)
