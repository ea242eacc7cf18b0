//go:build !linux

package testtmp

// memDir finds no memory file system outside Linux: the tests keep the
// system's temporary directory.
func memDir() string { return "" }
