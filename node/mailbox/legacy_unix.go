//go:build !windows

package mailbox

import (
	"errors"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// adoptLegacyProcessing empties outbox/.processing, where versions before
// the sticky outbox kept the files being sent, into o.proc, and removes
// it. A member of the mailbox group could rename or replace it there, so
// it is opened without following a link and used only if it is a folder
// of meshd's user; its entries are moved by name relative to that
// descriptor, so a swap after the check moves nothing from elsewhere.
func (o *Outbox) adoptLegacyProcessing(legacy string) {
	d, err := openNoFollow(unix.AT_FDCWD, legacy, openDir)
	switch {
	case errors.Is(err, unix.ENOENT):
		return
	case errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR):
		o.log.Warn("mailbox: outbox: left alone an outbox/.processing that is not a folder (meshd never makes one there now); remove it", "path", legacy)
		return
	case err != nil:
		o.log.Error("mailbox: outbox: open outbox/.processing", "err", err)
		return
	}
	defer d.Close()
	st, err := fstat(d)
	if err != nil {
		o.log.Error("mailbox: outbox: outbox/.processing", "err", err)
		return
	}
	if int(st.Uid) != os.Geteuid() {
		o.log.Warn("mailbox: outbox: left alone an outbox/.processing that meshd's user does not own; remove it", "path", legacy, "owner", st.Uid)
		return
	}
	es, err := d.ReadDir(-1)
	if err != nil {
		o.log.Error("mailbox: outbox: read outbox/.processing", "err", err)
		return
	}
	moved := 0
	for _, e := range es {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		dst, err := freeName(o.proc, strings.TrimSuffix(name, ".txt"), ".txt", "")
		if err == nil {
			err = unix.Renameat(int(d.Fd()), name, unix.AT_FDCWD, dst)
		}
		if err != nil {
			o.log.Error("mailbox: outbox: move a file from outbox/.processing", "file", name, "err", err)
			continue
		}
		moved++
	}
	if moved > 0 {
		o.log.Info("mailbox: outbox: moved the files an older version left in outbox/.processing", "count", moved, "to", o.proc)
	}
	if err := os.Remove(legacy); err != nil {
		o.log.Warn("mailbox: outbox: could not remove the old outbox/.processing", "err", err)
	}
}
