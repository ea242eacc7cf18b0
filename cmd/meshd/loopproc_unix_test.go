//go:build unix

package main

import (
	"os/exec"
	"syscall"
)

// ownGroup makes cmd the leader of a process group of its own, so that
// killGroup ends its children (a loop's meshctl wait) with it.
func ownGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
