package mailbox

import (
	"os"
	"path/filepath"
	"strings"
)

// adoptLegacyProcessing empties outbox/.processing, where older versions
// kept the files being sent, into o.proc, and removes it. Windows has no
// mailbox group, so no one else writes to the outbox.
func (o *Outbox) adoptLegacyProcessing(legacy string) {
	fi, err := os.Lstat(legacy)
	if err != nil || !fi.IsDir() {
		return
	}
	es, err := os.ReadDir(legacy)
	if err != nil {
		o.log.Error("mailbox: outbox: read outbox/.processing", "err", err)
		return
	}
	for _, e := range es {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		dst, err := freeName(o.proc, strings.TrimSuffix(name, ".txt"), ".txt", "")
		if err == nil {
			err = os.Rename(filepath.Join(legacy, name), dst)
		}
		if err != nil {
			o.log.Error("mailbox: outbox: move a file from outbox/.processing", "file", name, "err", err)
		}
	}
	os.Remove(legacy)
}
