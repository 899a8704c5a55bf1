package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/cuengine/engine/providers"
	"github.com/cuengine/engine/providers/plugin"
)

func init() { metrics.Registry.MustRegister(plugin.Collectors()...) }

// newProviders registers a plugin for every provider executable in dir
// (engine-provider-<name>; empty dir: the engine binary's directory). The
// returned plugins are run by every replica, each on demand: its process
// starts when a call first needs it (a template that names no bucket
// costs no gcs plugin), and is supervised from then on. A provider a
// template names that is not there is UnknownProvider on its parents.
func newProviders(logger logr.Logger, dir string, ping pluginPing) (*providers.Registry, []*plugin.Plugin, error) {
	if dir == "" {
		var err error
		if dir, err = engineDir(); err != nil {
			return nil, nil, err
		}
	}
	found, err := plugin.Discover(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("--provider-dir: %w", err)
	}
	reg := providers.NewRegistry()
	plugins := make([]*plugin.Plugin, 0, len(found))
	for _, f := range found {
		p := plugin.New(plugin.Options{
			Name: f.Name, Path: f.Path, Logger: logger.WithName("provider"), OnDemand: true,
			PingInterval: ping.interval, PingTimeout: ping.timeout,
		})
		reg.Register(f.Name, p)
		plugins = append(plugins, p)
	}
	logger.Info("provider plugins", "dir", dir, "providers", reg.Names())
	return reg, plugins, nil
}

// pluginPing is how the plugins are pinged (plugin.Options); zero takes
// the package's defaults.
type pluginPing struct{ interval, timeout time.Duration }

// engineDir is the directory of the running engine binary, links
// resolved: where make build, the image and the chart put the plugins.
func engineDir() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("finding the engine binary: %w", err)
	}
	if resolved, err := filepath.EvalSymlinks(exe); err == nil {
		exe = resolved
	}
	return filepath.Dir(exe), nil
}

// pluginsHealth is nil while every plugin is up or idle (not needed yet)
// and names the first that is down otherwise.
func pluginsHealth(plugins []*plugin.Plugin) func() error {
	return func() error {
		for _, p := range plugins {
			if err := p.Health(); err != nil {
				return err
			}
		}
		return nil
	}
}

// pluginsStatus says what each plugin is doing, a line each, for
// /readyz?verbose: "provider gcs: idle (not needed yet)".
func pluginsStatus(plugins []*plugin.Plugin) func() []string {
	return func() []string {
		lines := make([]string, 0, len(plugins))
		for _, p := range plugins {
			lines = append(lines, "provider "+p.Name()+": "+p.Status().String())
		}
		return lines
	}
}
