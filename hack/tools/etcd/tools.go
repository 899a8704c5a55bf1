//go:build tools

// Package tools pins the etcd server that the Makefile's assets target builds
// into bin/etcd.
package tools

import _ "go.etcd.io/etcd/server/v3"
