//go:build !linux

package plugin

import "syscall"

// sysProcAttr puts a plugin in its own process group. Without Linux's
// parent-death signal, a plugin whose engine died stops when its stdin
// closes.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// killGroup sends SIGKILL to the process group pid leads.
func killGroup(pid int) error { return syscall.Kill(-pid, syscall.SIGKILL) }
