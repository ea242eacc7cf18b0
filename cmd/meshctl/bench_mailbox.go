package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/meshd/meshd/node/mailbox"
)

// mailboxWatch times the mailbox files of one reader with inotify: it
// notes when each file appears in the reader's inbox directories. bench
// counts and times every delivery this way, at the file a reader of the
// mailbox would open, without asking meshd for anything while it runs.
type mailboxWatch struct {
	root  string
	w     *fsnotify.Watcher
	done  chan struct{}
	close func() // stops the watch; idempotent

	mu sync.Mutex
	// appeared: when the file of an envelope appeared, by its tag
	// (mailbox.Tag). A zero time: found by a rescan, not timed.
	appeared map[string]appearance
	inboxes  []string        // the inbox directories watched
	extra    map[string]bool // names of further files of a tag noted: duplicates
	full     int             // files not noted: appeared was full
	overflow bool            // the kernel dropped events; rescan before trusting appeared
	err      error           // the first error the watch reported
}

// appearance is one mirror file that appeared.
type appearance struct {
	at   time.Time
	name string
}

// maxAppeared bounds the files a watch remembers.
const maxAppeared = 1 << 22

// errWatch reports that inotify cannot watch a mailbox.
var errWatch = errors.New("cannot watch the mailbox with inotify")

// watchMailbox starts watching the mailbox at root: its day directories of
// today and tomorrow (UTC) and their inbox directories, and the root for
// day directories made during the run.
func watchMailbox(root string) (*mailboxWatch, error) {
	// A burst of files at full speed must not overflow the channel
	// between fsnotify's reader and the loop below while it holds mu.
	w, err := fsnotify.NewBufferedWatcher(4096)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", errWatch, root, err)
	}
	m := &mailboxWatch{root: root, w: w, done: make(chan struct{}), appeared: map[string]appearance{}, extra: map[string]bool{}}
	m.close = sync.OnceFunc(func() {
		w.Close()
		<-m.done
	})
	if err := w.Add(root); err != nil {
		w.Close()
		return nil, fmt.Errorf("%w %s: %w", errWatch, root, err)
	}
	now := time.Now()
	for _, day := range []time.Time{now, now.Add(24 * time.Hour)} {
		// Files there now are older than anything bench will send.
		m.addDay(filepath.Dir(mailbox.InboxDir(root, day)), false)
	}
	go m.loop()
	return m, nil
}

// addDay watches a day directory and its inbox, if they exist.
func (m *mailboxWatch) addDay(dir string, fresh bool) {
	if m.w.Add(dir) == nil {
		m.addInbox(filepath.Join(dir, "inbox"), fresh)
	}
}

// addInbox watches an inbox directory. A fresh one, made while the watch
// runs, may hold files made before its watch: it notes them.
func (m *mailboxWatch) addInbox(dir string, fresh bool) {
	if m.w.Add(dir) != nil {
		return
	}
	m.mu.Lock()
	m.inboxes = append(m.inboxes, dir)
	m.mu.Unlock()
	if fresh {
		m.scan(dir, time.Now())
	}
}

// scan notes the files in dir not noted yet, as appeared at t.
func (m *mailboxWatch) scan(dir string, t time.Time) {
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		m.fail(err)
	}
	for _, e := range ents {
		m.seen(e.Name(), t)
	}
}

// rescan reads every inbox directory watched and notes, untimed, the files
// the events missed (after an overflow).
func (m *mailboxWatch) rescan() {
	m.mu.Lock()
	dirs := append([]string(nil), m.inboxes...)
	m.mu.Unlock()
	for _, d := range dirs {
		m.scan(d, time.Time{})
	}
}

func (m *mailboxWatch) fail(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err == nil {
		m.err = err
	}
}

func (m *mailboxWatch) loop() {
	defer close(m.done)
	for {
		select {
		case ev, ok := <-m.w.Events:
			if !ok {
				return
			}
			if !ev.Has(fsnotify.Create) {
				continue
			}
			now := time.Now()
			dir, name := filepath.Split(ev.Name)
			dir = filepath.Clean(dir)
			switch {
			case dir == m.root:
				if mailbox.IsDay(name) {
					m.addDay(ev.Name, true)
				}
			case name == "inbox" && filepath.Dir(dir) == m.root:
				m.addInbox(ev.Name, true)
			default:
				m.seen(name, now)
			}
		case err, ok := <-m.w.Errors:
			if !ok {
				return
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				m.mu.Lock()
				m.overflow = true
				m.mu.Unlock()
				continue
			}
			m.fail(err)
		}
	}
}

// seen notes that the mirror file name appeared at t (zero: untimed).
func (m *mailboxWatch) seen(name string, t time.Time) {
	tag, ok := mailbox.TagOf(name)
	if !ok {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if a, ok := m.appeared[tag]; ok {
		if a.name != name {
			m.extra[name] = true
		}
		return
	}
	if len(m.appeared) >= maxAppeared {
		m.full++
		return
	}
	m.appeared[tag] = appearance{at: t, name: name}
}

// match looks up the files of the envelopes of pending (seqs, indexes
// into ids) among those that appeared. For each found it calls found with
// the seq and the time the file appeared (zero: untimed), and it returns
// the seqs still not found, in pending's array.
func (m *mailboxWatch) match(pending []int, ids []string, found func(seq int, at time.Time)) []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	left := pending[:0]
	for _, seq := range pending {
		a, ok := m.appeared[mailbox.Tag(ids[seq])]
		if !ok {
			left = append(left, seq)
			continue
		}
		found(seq, a.at)
	}
	return left
}

// status returns what the watch noted besides appearances.
func (m *mailboxWatch) status() (dups, full int, overflow bool, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.extra), m.full, m.overflow, m.err
}
