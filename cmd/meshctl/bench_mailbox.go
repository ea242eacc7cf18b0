package main

import (
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/meshd/meshd/node/mailbox"
)

// mailboxWatch times the mailbox files of one reader with inotify: it
// notes when each file appears in the reader's inbox directories, so that
// bench can time a sampled message's file without polling for it. Polling
// every millisecond cost the load generator about a quarter of its CPU at
// saturation, on a machine the nodes share.
type mailboxWatch struct {
	root  string
	w     *fsnotify.Watcher
	done  chan struct{}
	close func() // stops the watch; idempotent

	mu sync.Mutex
	// appeared: when the file of an envelope appeared, by its tag
	// (mailbox.Tag), for files no sample asked for yet.
	appeared map[string]time.Time
	// wanted: the samples whose file has not appeared, with the send time.
	wanted map[string]time.Time
	lat    []time.Duration
}

// maxAppeared bounds the appearances a watch remembers without a sample
// asking for them.
const maxAppeared = 1 << 20

// watchMailbox starts watching the mailbox at root: its day directories of
// today and tomorrow (UTC) and their inbox directories, and the root for
// day directories made during the run.
func watchMailbox(root string) (*mailboxWatch, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	m := &mailboxWatch{root: root, w: w, done: make(chan struct{}),
		appeared: map[string]time.Time{}, wanted: map[string]time.Time{}}
	m.close = sync.OnceFunc(func() {
		w.Close()
		<-m.done
	})
	if err := w.Add(root); err != nil {
		w.Close()
		return nil, err
	}
	now := time.Now()
	for _, day := range []time.Time{now, now.Add(24 * time.Hour)} {
		m.addDay(filepath.Dir(mailbox.InboxDir(root, day)))
	}
	go m.loop()
	return m, nil
}

// addDay watches a day directory and its inbox, if they exist.
func (m *mailboxWatch) addDay(dir string) {
	if m.w.Add(dir) == nil {
		m.addInbox(filepath.Join(dir, "inbox"))
	}
}

// addInbox watches an inbox directory, and notes the files already in it:
// those made between its creation and the watch.
func (m *mailboxWatch) addInbox(dir string) {
	if m.w.Add(dir) != nil {
		return
	}
	ents, _ := os.ReadDir(dir)
	now := time.Now()
	for _, e := range ents {
		m.seen(e.Name(), now)
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
					m.addDay(ev.Name)
				}
			case name == "inbox" && filepath.Dir(dir) == m.root:
				m.addInbox(ev.Name)
			default:
				m.seen(name, now)
			}
		case _, ok := <-m.w.Errors:
			if !ok {
				return
			}
		}
	}
}

// seen notes that the mirror file name appeared at t.
func (m *mailboxWatch) seen(name string, t time.Time) {
	id, ok := mailbox.TagOf(name)
	if !ok {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if sent, ok := m.wanted[id]; ok {
		delete(m.wanted, id)
		m.lat = append(m.lat, t.Sub(sent))
	} else if _, dup := m.appeared[id]; !dup && len(m.appeared) < maxAppeared {
		m.appeared[id] = t
	}
}

// want asks for the time of the file of envelope id, sent at sent.
func (m *mailboxWatch) want(id string, sent time.Time) {
	id = mailbox.Tag(id)
	m.mu.Lock()
	defer m.mu.Unlock()
	if t, ok := m.appeared[id]; ok {
		delete(m.appeared, id)
		m.lat = append(m.lat, t.Sub(sent))
		return
	}
	m.wanted[id] = sent
}

// pending is how many wanted files have not appeared.
func (m *mailboxWatch) pending() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.wanted)
}

// finish stops the watch and returns the latencies timed and how many
// wanted files never appeared.
func (m *mailboxWatch) finish() ([]time.Duration, int) {
	m.close()
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lat, len(m.wanted)
}
