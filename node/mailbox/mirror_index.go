package mailbox

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/meshd/meshd/internal/fsutil"
)

// indexLines are the index lines of a batch, by day.
type indexLines struct {
	byDay map[string]*bytes.Buffer
	days  []string // the keys of byDay, in order
}

// of returns the buffer of day's lines.
func (l *indexLines) of(day string) *bytes.Buffer {
	b, ok := l.byDay[day]
	if !ok {
		if l.byDay == nil {
			l.byDay = map[string]*bytes.Buffer{}
		}
		b = new(bytes.Buffer)
		l.byDay[day] = b
		l.days = append(l.days, day)
	}
	return b
}

// appendLinesLocked appends each day's lines to its index and returns
// how many lines it appended.
func (m *Mirror) appendLinesLocked(l *indexLines) (int, error) {
	var errs []error
	n := 0
	for _, day := range l.days {
		b := l.byDay[day].Bytes()
		if err := m.appendIndexLocked(day, b); err != nil {
			errs = append(errs, err)
			continue
		}
		n += bytes.Count(b, []byte("\n"))
	}
	return n, errors.Join(errs...)
}

// Reindex appends the index lines of files the day indexes do not list.
// Write renames a batch's files into place before it appends their
// lines, so a crash in between, or a power loss before the next
// [Mirror.Sync], can leave files that their day's index lacks. paths[i] is the file of items[i], in its
// day's inbox directory; the lines go to that day's index, after the lines
// already there. It returns how many lines it appended.
func (m *Mirror) Reindex(items []Item, paths []string) (int, error) {
	if len(items) != len(paths) {
		return 0, fmt.Errorf("mailbox: reindex %d items with %d paths", len(items), len(paths))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var (
		listed = map[string]map[string]bool{} // day → file names its index lists
		lines  indexLines
		errs   []error
	)
	for i, it := range items {
		name := filepath.Base(filepath.Dir(paths[i])) + "/" + filepath.Base(paths[i])
		day := filepath.Base(filepath.Dir(filepath.Dir(paths[i])))
		names, err := m.listedLocked(listed, day)
		if err != nil {
			errs = append(errs, err)
		}
		if names == nil || names[name] {
			continue // the day's index unreadable, or the line there
		}
		hs, body, err := render(it)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		when := it.Delivered
		if when.IsZero() {
			when = m.now()
		}
		b := lines.of(day)
		b.Write(appendIndexLine(b.AvailableBuffer(), when.UTC(), it.Priority, hs, name, body))
		names[name] = true
	}
	added, err := m.appendLinesLocked(&lines)
	return added, errors.Join(append(errs, err)...)
}

// listedLocked returns the names day's index lists, read once per call
// of Rewrite or Reindex and kept in listed; nil (once, with the error) when
// the index cannot be read. m.mu must be held.
func (m *Mirror) listedLocked(listed map[string]map[string]bool, day string) (map[string]bool, error) {
	if names, ok := listed[day]; ok {
		return names, nil
	}
	names, err := m.indexed(day)
	listed[day] = names
	return names, err
}

// indexed returns the files that day's index lists, as "inbox/NAME",
// "read/NAME" or "sent/NAME": the field of each line that starts with a
// folder's name. A missing index lists none.
func (m *Mirror) indexed(day string) (map[string]bool, error) {
	names := map[string]bool{}
	f, err := os.Open(filepath.Join(m.dir, day, "index.txt"))
	if errors.Is(err, fs.ErrNotExist) {
		return names, nil
	}
	if err != nil {
		return nil, wrapFS("index", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		for field := range strings.SplitSeq(sc.Text(), "\t") {
			if isFolderPath(field) {
				names[field] = true
				break
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, wrapFS("index", err)
	}
	return names, nil
}

// appendIndexLine appends the index line of the file name ("inbox/NAME",
// "read/NAME" or "sent/NAME", relative to its day directory) to b.
func appendIndexLine(b []byte, when time.Time, prio string, hs []header, name, body string) []byte {
	var from, to, kind string
	for _, h := range hs {
		switch h.name {
		case "From":
			from = h.value
		case "To":
			to = h.value
		case "Kind":
			kind = h.value
		}
	}
	if prio == "" {
		prio = "-"
	}
	b = when.AppendFormat(b, time.TimeOnly)
	for _, f := range [...]string{prio, kind, from, to} {
		b = append(b, '\t')
		b = append(b, f...)
	}
	b = append(b, '\t')
	b = append(b, name...)
	b = append(b, '\t')
	b = appendSummary(b, body)
	return append(b, '\n')
}

// summaryLen is how many characters of the body the index shows.
const summaryLen = 80

// summary returns the index summary of a body: each run of spaces and
// control characters becomes one space, then the first [summaryLen]
// characters, without a trailing space. Bytes that are not UTF-8 become
// "?".
func summary(body string) string { return string(appendSummary(nil, body)) }

// appendSummary appends the index summary of body to b.
func appendSummary(b []byte, body string) []byte {
	start := len(b)
	n := 0
	space := false
	for i, r := range body {
		if n == summaryLen {
			break
		}
		if r == ' ' || unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			space = len(b) > start
			continue
		}
		if space {
			b = append(b, ' ')
			n++
			space = false
			if n == summaryLen {
				break
			}
		}
		if r == utf8.RuneError && isInvalidAt(body, i) {
			r = '?'
		}
		b = utf8.AppendRune(b, r)
		n++
	}
	return b
}

// openIndex is a day's index file kept open for appending.
type openIndex struct {
	path string
	f    *os.File
	fi   os.FileInfo // f's identity, to notice an index removed or replaced
}

// dropIndexLocked closes the index kept open, if any.
func (m *Mirror) dropIndexLocked() error {
	if m.index == nil {
		return nil
	}
	err := m.index.f.Close()
	m.index = nil
	return err
}

// appendIndexLocked appends lines to the day's index (and fsyncs it when
// the configuration says so). The index last appended to stays open: a
// batch then costs a stat, to notice the file removed or replaced by
// hand, and a write.
func (m *Mirror) appendIndexLocked(day string, lines []byte) error {
	path := filepath.Join(m.dir, day, "index.txt")
	if ix := m.index; ix != nil && ix.path == path {
		if fi, err := os.Stat(path); err == nil && os.SameFile(fi, ix.fi) {
			return m.appendOpenIndexLocked(lines, false)
		}
	}
	if err := m.dropIndexLocked(); err != nil {
		m.log.Warn("mailbox: close index", "err", err)
	}
	created, err := notExist(path)
	if err != nil {
		return wrapFS("index", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE, m.cfg.Access.fileMode())
	if err != nil {
		return wrapFS("index", err)
	}
	if created {
		if err := f.Chmod(m.cfg.Access.fileMode()); err != nil {
			f.Close()
			return wrapFS("index", err)
		}
	} else if torn, err := endsTorn(f); err != nil {
		f.Close()
		return wrapFS("index", err)
	} else if torn {
		// A crash cut the last line short: end it, so lines stay lines.
		lines = append([]byte("\n"), lines...)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return wrapFS("index", err)
	}
	m.index = &openIndex{path: path, f: f, fi: fi}
	return m.appendOpenIndexLocked(lines, created)
}

// appendOpenIndexLocked writes lines to the open index. After a failed
// write the file is closed, so the next batch reopens it and ends a line
// the failure cut short.
func (m *Mirror) appendOpenIndexLocked(lines []byte, created bool) error {
	ix := m.index
	if _, err := m.write(ix.f, lines); err != nil {
		m.dropIndexLocked()
		return wrapFS("index "+ix.path, err)
	}
	if m.cfg.SyncFiles {
		if err := ix.f.Sync(); err != nil {
			m.dropIndexLocked()
			return wrapFS("index "+ix.path+": fsync", err)
		}
		if created {
			if err := fsutil.SyncDir(filepath.Dir(ix.path)); err != nil {
				return wrapFS("fsync directory", err)
			}
		}
	} else if m.sys.syncfs == nil {
		m.unsynced.add(ix.path)
		if created {
			m.unsynced.add(filepath.Dir(ix.path))
		}
	}
	return nil
}

// endsTorn reports whether f is not empty and does not end in "\n".
func endsTorn(f *os.File) (bool, error) {
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return false, err
	}
	var last [1]byte
	if _, err := f.ReadAt(last[:], fi.Size()-1); err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	return last[0] != '\n', nil
}
