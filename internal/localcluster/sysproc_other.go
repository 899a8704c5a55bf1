//go:build !linux

package localcluster

import "syscall"

// sysProcAttr puts each control-plane process in its own process group, so a
// Ctrl-C in the terminal reaches only our process, which then stops the
// cluster in order.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
