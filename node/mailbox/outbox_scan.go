package mailbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// eligible reports whether an outbox entry is a file to send: a ".txt"
// name that does not start with "." and is not the README.
func eligible(name string) bool {
	return strings.HasSuffix(name, ".txt") && !strings.HasPrefix(name, ".") && name != readmeName
}

// recover processes the files an interrupted run left in .processing.
func (o *Outbox) recover(ctx context.Context, send func(*OutgoingMessage) (Result, error)) {
	es, err := os.ReadDir(o.proc)
	if err != nil {
		o.log.Error("mailbox: outbox: recovery", "err", err)
		return
	}
	for _, e := range es {
		if o.stopping(ctx) {
			return
		}
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		o.log.Warn("mailbox: outbox: processing again a file an interrupted run left; it may have been sent already",
			"file", name)
		o.count(func(s *OutboxStats) { s.Picked++; s.Recovered++ })
		o.process(ctx, name, filepath.Join(o.proc, name), send)
	}
}

// scan processes the eligible files in the outbox, in name order.
func (o *Outbox) scan(ctx context.Context, send func(*OutgoingMessage) (Result, error)) {
	es, err := os.ReadDir(o.out)
	if err != nil {
		o.log.Error("mailbox: outbox: scan", "err", err)
		return
	}
	for _, e := range es { // ReadDir sorts by name
		if o.stopping(ctx) {
			return
		}
		name := e.Name()
		if !eligible(name) {
			continue
		}
		claimed, err := freeName(o.proc, strings.TrimSuffix(name, ".txt"), ".txt", "")
		if err == nil {
			err = os.Rename(filepath.Join(o.out, name), claimed)
		}
		if errors.Is(err, fs.ErrNotExist) {
			continue // taken by someone else, or withdrawn
		}
		if err != nil {
			o.claimFailed(name, err)
			continue
		}
		o.count(func(s *OutboxStats) { s.Picked++ })
		o.process(ctx, name, claimed, send)
	}
}

// claimFailed logs, once per name, an entry the scan could not claim: a
// folder another user made in a shared outbox cannot be moved by meshd's
// user (moving a folder needs write access to it), and would otherwise
// be logged at every scan.
func (o *Outbox) claimFailed(name string, err error) {
	if o.unclaimable == nil || len(o.unclaimable) >= maxUnclaimable {
		o.unclaimable = map[string]bool{}
	}
	if o.unclaimable[name] {
		return
	}
	o.unclaimable[name] = true
	o.log.Error("mailbox: outbox: cannot take this entry; remove it", "file", name, "err", err)
}

// maxUnclaimable bounds the names claimFailed remembers.
const maxUnclaimable = 1024

// read reads a claimed file, refusing anything but a regular file of at
// most MaxFileSize bytes.
func (o *Outbox) read(path string) ([]byte, string, error) {
	// Only a regular file is read. Lstat names what else it is; the open
	// neither follows a link nor waits for a FIFO's writer (or a device),
	// and the fstat after it catches a swap in between.
	li, err := os.Lstat(path)
	if err != nil {
		return nil, ReasonUnreadable, fmt.Errorf("cannot open: %w", err)
	}
	if !li.Mode().IsRegular() {
		return nil, ReasonUnreadable, fmt.Errorf("%w (%s)", errNotRegular, kindOf(li.Mode()))
	}
	f, err := os.OpenFile(path, os.O_RDONLY|openNoFollowNoBlock, 0)
	if err != nil {
		return nil, ReasonUnreadable, fmt.Errorf("cannot open: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, ReasonUnreadable, err
	}
	if !fi.Mode().IsRegular() || !os.SameFile(li, fi) {
		return nil, ReasonUnreadable, fmt.Errorf("%w (%s, replaced while opened)", errNotRegular, kindOf(fi.Mode()))
	}
	// A hard link is a name for a file that may live anywhere on the disk,
	// the node's key included where the kernel lets a user link files it
	// cannot read (fs.protected_hardlinks=0). Nothing of it is read, so
	// nothing of it can reach failed/ or the wire.
	if n, ok := linkCount(fi); ok && n > 1 {
		return nil, ReasonUnreadable, WithHint(fmt.Errorf("%w (a hard link: the file has %d names)", errNotRegular, n),
			"write a new file and rename it into the outbox; a link to another file is never read")
	}
	b, err := io.ReadAll(io.LimitReader(f, o.cfg.MaxFileSize+1))
	if err != nil {
		return nil, ReasonUnreadable, err
	}
	if int64(len(b)) > o.cfg.MaxFileSize {
		return nil, ReasonTooLarge, WithHint(fmt.Errorf("file exceeds %d bytes", o.cfg.MaxFileSize),
			"a message body is at most 256 KiB (262144 bytes): split it into several files, or send a path or URL to the data")
	}
	return b, "", nil
}

// errNotRegular is the reason an outbox entry that is not a regular file
// (a FIFO, a link, a folder, a device, a hard link) goes to failed/.
var errNotRegular = errors.New("not a regular file")

// kindOf names a file type for the .error file.
func kindOf(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "type " + m.Type().String()
}

// readNoFollow reads the regular file at path, at most limit bytes,
// without following a link or waiting for a FIFO's writer.
func readNoFollow(path string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|openNoFollowNoBlock, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, errNotRegular
	}
	return io.ReadAll(io.LimitReader(f, limit))
}
