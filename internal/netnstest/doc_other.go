//go:build !linux

// Package netnstest builds networks out of Linux network namespaces for
// tests; on other systems it is empty, and the tests that use it are
// built for Linux only.
package netnstest
