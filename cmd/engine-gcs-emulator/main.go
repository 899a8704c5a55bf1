// Command engine-gcs-emulator serves the Cloud Storage emulator of package
// internal/gcsemulator on a loopback port for `engine dev`, which starts it
// from beside the engine binary so that the engine itself links no Cloud
// Storage code. It prints the emulator's host:port (the value of
// STORAGE_EMULATOR_HOST) on a line of its own, then serves until SIGTERM,
// SIGINT or the end of its stdin (its parent gone).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/cuengine/engine/internal/gcsemulator"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	emu, err := gcsemulator.Start(gcsemulator.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "engine-gcs-emulator:", err)
		os.Exit(1)
	}
	fmt.Println(emu.Host())
	ctx, cancel := context.WithCancel(ctx)
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); cancel() }()
	<-ctx.Done()
	if err := emu.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "engine-gcs-emulator:", err)
		os.Exit(1)
	}
}
