package main

import (
	"fmt"
	"os"
	"os/exec"
)

// reexec starts a new meshd of the same arguments and standard streams,
// and lets this process exit (Windows has no exec).
func reexec() int {
	exe, err := os.Executable()
	if err == nil {
		cmd := exec.Command(exe, os.Args[1:]...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
		if err = cmd.Start(); err == nil {
			return 0
		}
	}
	fmt.Fprintf(os.Stderr, "meshd: start again after adopting an org: %v\nhint: run meshd again; the home holds the adopted org\n", err)
	return 1
}
