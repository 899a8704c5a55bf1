// Package watch reloads a templates directory when its files change (hot
// reload): fsnotify events on the directory and every subdirectory,
// debounced into one reload per burst, and a periodic rescan behind them.
// Each reload is a templates.LoadWith; a Watcher serves the last set that
// loaded and reports every change of what it serves, or of the error, once
// (Options.OnReload, a ReloadEvent).
//
// It sits above templates: it imports templates (Load, Set, Skipped) and
// contract at most, and nothing else of this module; templates never
// imports it (hack/imports.sh).
package watch
