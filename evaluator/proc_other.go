//go:build !linux

package evaluator

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }
