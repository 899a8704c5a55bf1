package evaluator

import "syscall"

// sysProcAttr kills an evaluator process when the engine's thread that
// started it dies, so that an engine that crashes leaves no evaluator
// behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
