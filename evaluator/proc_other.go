//go:build !linux

package evaluator

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }

// yieldCPU does nothing where the engine does not know how to lower every
// thread's priority.
func yieldCPU() {}
