//go:build !windows

package main

import (
	"fmt"
	"os"
	"syscall"
)

// reexec replaces this process with a new meshd of the same arguments.
func reexec() int {
	exe, err := os.Executable()
	if err == nil {
		err = syscall.Exec(exe, os.Args, os.Environ())
	}
	fmt.Fprintf(os.Stderr, "meshd: start again after adopting an org: %v\nhint: run meshd again; the home holds the adopted org\n", err)
	return 1
}
