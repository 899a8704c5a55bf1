package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestImageLayoutsInStep: the Dockerfile (Docker users) and `make image`
// (hack/image.sh, podman) build the same image. Both assemble the root
// filesystem with hack/image/rootfs.sh, and the Dockerfile's last stage is
// hack/image/Containerfile but for where the root filesystem comes from.
func TestImageLayoutsInStep(t *testing.T) {
	root := filepath.Join("..", "..")
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(root, name))
		require.NoError(t, err)
		return string(b)
	}
	dockerfile := read("Dockerfile")
	assert.Contains(t, instructions(dockerfile), `RUN --mount=type=cache,target=/root/.cache/go-build GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} hack/image/rootfs.sh /rootfs "${VERSION}"`,
		"the Dockerfile's build stage assembles the root filesystem with hack/image/rootfs.sh")

	stages := strings.Split(dockerfile, "\nFROM ")
	last := "FROM " + stages[len(stages)-1]
	got := strings.Replace(instructions(last), "COPY --from=build /rootfs/ /", "COPY rootfs/ /", 1)
	assert.Equal(t, instructions(read("hack/image/Containerfile")), got,
		"the Dockerfile's last stage is hack/image/Containerfile")

	assert.Contains(t, read("hack/image.sh"), `hack/image/rootfs.sh "$ctx/rootfs"`, "make image assembles the root filesystem with hack/image/rootfs.sh")
	assert.Contains(t, read("hack/image.sh"), `cp hack/image/Containerfile "$ctx/Containerfile"`, "make image builds hack/image/Containerfile")

	// The user the image and the pod run as exists in the image.
	assert.Contains(t, read("hack/image/passwd"), "nonroot:x:65532:65532:")
	assert.Contains(t, read("hack/image/group"), "nonroot:x:65532:")
}

// instructions are a Dockerfile's instructions, one a line, without
// comments and with continuation lines joined.
func instructions(file string) string {
	var out []string
	var cur string
	for _, line := range strings.Split(file, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if more, ok := strings.CutSuffix(line, `\`); ok {
			cur += strings.TrimSpace(more) + " "
			continue
		}
		out = append(out, cur+line)
		cur = ""
	}
	return strings.Join(out, "\n")
}
