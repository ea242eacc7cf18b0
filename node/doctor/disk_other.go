//go:build !(linux || darwin || freebsd)

package doctor

import "errors"

// DiskSpace is not measured here: the check reports the space unknown.
func DiskSpace(string) (free, total uint64, err error) {
	return 0, 0, errors.New("not measured on this system")
}
