package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/home"
)

const usageCompact = `usage: meshctl compact [--json]

Reclaim the space of the history store (<home>/history.db). The store's
file never shrinks on its own: retention frees pages inside it for reuse,
but the file keeps its largest size. compact writes a compact copy next
to it and renames it over the original.

meshd must be stopped first: compact takes the home's lock, so it refuses
while meshd runs, and meshd refuses to start while compact runs. meshd
also compacts by itself at start when the file is at least 64 MiB and at
least half of it is free pages (meshd --compact-at-start-mib).

examples:
  systemctl stop meshd && meshctl compact && systemctl start meshd
`

// compactResult is what compact reports.
type compactResult struct {
	Path   string `json:"path"`
	Before int64  `json:"bytes_before"`
	After  int64  `json:"bytes_after"`
}

func runCompact(a *app, _ *noFlags, pos []string) error {
	if err := a.nargs(pos, 0, 0); err != nil {
		return err
	}
	res, err := compactStore(a.home())
	if err != nil {
		switch {
		case errors.Is(err, home.ErrLocked):
			return withHint(err, "stop meshd, run meshctl compact, then start meshd again")
		case errors.Is(err, history.ErrCorrupt):
			return withHint(err, "a damaged store is rebuilt, not compacted: meshctl repair")
		}
		return err
	}
	if a.json {
		return a.printJSON(res)
	}
	fmt.Fprintf(a.Stdout, "compacted %s: %s → %s\n", res.Path, sizeText(res.Before), sizeText(res.After))
	return nil
}

// compactStore compacts h's history store in place while holding h's
// lock.
func compactStore(h home.Home) (res compactResult, err error) {
	path := h.DBPath()
	res.Path = path
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return res, fmt.Errorf("no history store at %s", path)
		}
		return res, fmt.Errorf("history store: %w", err)
	}
	release, err := h.Lock()
	if err != nil {
		return res, err
	}
	defer func() {
		if rerr := release(); rerr != nil && err == nil {
			err = fmt.Errorf("release home lock: %w", rerr)
		}
	}()
	res.Before, res.After, err = history.CompactFile(path, history.Config{})
	return res, err
}

// sizeText renders a byte count for humans: "812 B", "3.1 MiB".
func sizeText(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
