package plugin

import "syscall"

// sysProcAttr puts a plugin in its own process group, so a Ctrl-C in the
// terminal reaches only the engine, which then stops its plugins, and has
// the kernel kill it if the engine dies without stopping it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// killGroup sends SIGKILL to the process group pid leads.
func killGroup(pid int) error { return syscall.Kill(-pid, syscall.SIGKILL) }
