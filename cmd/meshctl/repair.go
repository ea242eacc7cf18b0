package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"time"

	"github.com/meshd/meshd/channel"
	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/internal/fsutil"
	"github.com/meshd/meshd/node/home"
	"github.com/meshd/meshd/node/mailbox"
	"github.com/meshd/meshd/proto"
)

const usageRepair = `usage: meshctl repair [--force] [--unread] [--json]

Rebuild a damaged history store (<home>/history.db) from the mailbox
mirror. Run it when meshd refuses to start because the store is damaged
(cut short by a full disk or a crash of the file system, overwritten, or
written by a newer meshd).

repair:
  1. moves the store aside as history.db.damaged-<UTC time>: it is kept,
     never deleted;
  2. builds a new store from the mailbox: every file under
     mailbox/<date>/inbox/ carries its signed envelope, and each one is
     verified (signature, headers and body, sender in the roster, a DM
     addressed to this node) before it is taken; a file that fails is
     refused and listed with the reason, and stays in the mailbox;
  3. restores what the files tell of the inbox: delivery time (from the
     file's name), priority and whether it came through history sync.
     The mailbox does not record what was read, so restored items are
     marked read (an agent does not act on them twice); --unread marks
     them unread instead;
  4. rebuilds the catch-up position (each sender's sequence marks) from
     the messages taken, and starts a new send epoch, so no sequence
     number is used twice.

After the repair, start meshd: channel history the mailbox did not hold
fills in from peers through history sync. Its first round of each
channel asks by time as well as by the rebuilt marks, so the messages
sent while meshd was stopped and any older ones the mailbox lacked both
arrive.

meshd must be stopped: repair takes the home's lock and refuses while
meshd runs. A store that checks out is left alone unless --force.

flags:
  --force    rebuild even a store that checks out
  --unread   mark the restored items unread

examples:
  systemctl stop meshd && meshctl repair && systemctl start meshd
  meshctl repair --json | jq .refused
`

// repairResult is what repair reports.
type repairResult struct {
	Store string `json:"store"`
	// Damage is why the store needed the repair; empty when there was
	// no store, or it checked out and --force was given.
	Damage string `json:"damage,omitempty"`
	// MovedTo is where the old store went; empty when there was none.
	MovedTo    string          `json:"moved_to,omitempty"`
	Files      int             `json:"files"`
	Taken      int             `json:"taken"`
	Duplicates int             `json:"duplicates"`
	Refused    int             `json:"refused"`
	Refusals   []repairRefusal `json:"refusals"`
	Epoch      string          `json:"epoch"`
	TookMS     int64           `json:"took_ms"`
}

type repairRefusal struct {
	File   string `json:"file"`
	Reason string `json:"reason"`
}

// errHealthy: the store checks out and --force was not given.
var errHealthy = errors.New("the history store checks out")

// repairFlags are the flags of 'meshctl repair'.
type repairFlags struct {
	force  bool
	unread bool
}

func (fl *repairFlags) define(fs *flag.FlagSet) {
	fs.BoolVar(&fl.force, "force", false, "")
	fs.BoolVar(&fl.unread, "unread", false, "")
}

func runRepair(a *app, fl *repairFlags, pos []string) error {
	if err := a.nargs(pos, 0, 0); err != nil {
		return err
	}
	res, err := repairStore(a.home(), fl.force, !fl.unread, time.Now())
	switch {
	case errors.Is(err, home.ErrLocked):
		return withHint(err, "stop meshd first (systemctl stop meshd), then run meshctl repair")
	case errors.Is(err, errHealthy):
		return withHint(err, "nothing to repair; meshctl repair --force rebuilds it anyway")
	case err != nil:
		return err
	}
	if a.json {
		return a.printJSON(res)
	}
	if res.MovedTo != "" {
		fmt.Fprintf(a.Stdout, "moved the old store aside: %s\n", res.MovedTo)
		if res.Damage != "" {
			fmt.Fprintf(a.Stdout, "  it was: %s\n", res.Damage)
		}
	}
	fmt.Fprintf(a.Stdout, "rebuilt %s from %d mailbox files: %d taken, %d duplicates, %d refused\n",
		res.Store, res.Files, res.Taken, res.Duplicates, res.Refused)
	for _, r := range res.Refusals {
		fmt.Fprintf(a.Stdout, "  refused %s: %s\n", r.File, r.Reason)
	}
	fmt.Fprintf(a.Stdout, "new send epoch %s\n", res.Epoch)
	fmt.Fprintf(a.Stdout, "next: start meshd; channel history fills in from peers\n")
	return nil
}

// diagnose tells why the store at path cannot be used; "" if it checks
// out. A missing store is no damage either.
func diagnose(path string) (string, error) {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	_, err := history.CheckFile(path)
	if err == nil {
		// The structure checks out; opening checks the schema too.
		var st *history.Store
		if st, err = history.Open(path, history.Config{LockTimeout: time.Second}); err == nil {
			err = st.Close()
		}
	}
	if errors.Is(err, history.ErrCorrupt) {
		return err.Error(), nil
	}
	return "", err
}

// repairStore does the repair under h's lock (see usageRepair).
func repairStore(h home.Home, force, markRead bool, now time.Time) (res repairResult, err error) {
	start := time.Now()
	path := h.DBPath()
	res.Store, res.Refusals = path, []repairRefusal{}
	release, err := h.Lock()
	if err != nil {
		return res, err
	}
	defer func() {
		if rerr := release(); rerr != nil && err == nil {
			err = fmt.Errorf("release home lock: %w", rerr)
		}
	}()
	// What the files are checked against: the node's key and roster, and
	// the channel policies for channel names.
	id, err := h.LoadIdentity()
	if err != nil {
		return res, err
	}
	r, err := h.LoadRoster()
	if err != nil {
		return res, fmt.Errorf("the mailbox files are verified against the roster, which does not load: %w", err)
	}
	chans := channel.NewSet()
	_ = chans.Load(filepath.Join(h.Dir, "channels")) // unreadable policies only leave channel names unchecked

	res.Damage, err = diagnose(path)
	if err != nil {
		return res, err
	}
	_, statErr := os.Stat(path)
	exists := statErr == nil
	if exists && res.Damage == "" && !force {
		return res, fmt.Errorf("%w: %s", errHealthy, path)
	}
	if exists {
		res.MovedTo, err = moveAside(path, now)
		if err != nil {
			return res, err
		}
	}

	st, err := history.Open(path, history.Config{})
	if err != nil {
		return res, fmt.Errorf("new history store: %w", err)
	}
	defer func() {
		if cerr := st.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	files, err := mirrorFiles(h.MailboxDir())
	if err != nil {
		return res, err
	}
	res.Files = len(files)
	opts := mailbox.VerifyOptions{Roster: r, Channels: chans}
	var batch []history.Restored
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		added, err := st.Restore(batch)
		if err != nil {
			return fmt.Errorf("restore into the new store: %w", err)
		}
		for _, ok := range added {
			if ok {
				res.Taken++
			} else {
				res.Duplicates++
			}
		}
		batch = batch[:0]
		return nil
	}
	for _, f := range files {
		rs, reason := takeFile(f, opts, id.Pub, markRead)
		if reason != "" {
			rel, _ := filepath.Rel(h.MailboxDir(), f.path)
			res.Refusals = append(res.Refusals, repairRefusal{File: rel, Reason: reason})
			continue
		}
		if batch = append(batch, rs); len(batch) == 256 {
			if err := flush(); err != nil {
				return res, err
			}
		}
	}
	if err := flush(); err != nil {
		return res, err
	}
	res.Refused = len(res.Refusals)
	// The marks Restore built are the catch-up position: history sync
	// asks above them for what was sent while meshd was stopped, and for
	// the holes of files that are gone. The mailbox may also lack the
	// first numbers of a stream, or whole streams (a channel read but not
	// subscribed): the first round of each channel asks by time too.
	if err := st.SetBackfill(true); err != nil {
		return res, fmt.Errorf("new history store: %w", err)
	}
	// A new store has no counters: opening them starts a new epoch.
	sc, err := history.OpenSendCounter(st)
	if err != nil {
		return res, fmt.Errorf("new send epoch: %w", err)
	}
	res.Epoch = sc.Epoch().String()
	if err := sc.Close(); err != nil {
		return res, fmt.Errorf("new send epoch: %w", err)
	}
	res.TookMS = time.Since(start).Milliseconds()
	return res, nil
}

// moveAside renames path to path.damaged-<UTC time>, never over a file.
func moveAside(path string, now time.Time) (string, error) {
	base := path + ".damaged-" + now.UTC().Format("20060102T150405Z")
	to := base
	for i := 2; ; i++ {
		if _, err := os.Lstat(to); errors.Is(err, fs.ErrNotExist) {
			break
		}
		to = fmt.Sprintf("%s-%d", base, i)
	}
	if err := os.Rename(path, to); err != nil {
		return "", fmt.Errorf("move the damaged store aside: %w", err)
	}
	if err := fsutil.SyncDir(filepath.Dir(path)); err != nil {
		return "", err
	}
	return to, nil
}

// mailboxFile is one mirror file and the delivery time its path gives.
type mailboxFile struct {
	path      string
	delivered time.Time
}

var (
	dayDir   = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`)
	fileName = regexp.MustCompile(`^(\d{6})-[0-9a-f]{12}(-\d+)?\.txt$`)
)

// mirrorFiles lists the mirror files under root, oldest first.
func mirrorFiles(root string) ([]mailboxFile, error) {
	days, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the mailbox: %w", err)
	}
	var out []mailboxFile
	for _, d := range days {
		if !d.IsDir() || !dayDir.MatchString(d.Name()) {
			continue
		}
		// Inbox items, unread and read; sent/ holds this node's own
		// envelopes, which are not inbox items.
		for _, folder := range []string{"inbox", "read"} {
			dir := filepath.Join(root, d.Name(), folder)
			ents, err := os.ReadDir(dir)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("read the mailbox: %w", err)
			}
			for _, e := range ents {
				m := fileName.FindStringSubmatch(e.Name())
				if m == nil || !e.Type().IsRegular() {
					continue
				}
				t, err := time.Parse("2006-01-02 150405", d.Name()+" "+m[1])
				if err != nil {
					continue
				}
				out = append(out, mailboxFile{path: filepath.Join(dir, e.Name()), delivered: t})
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].delivered.Before(out[j].delivered) })
	return out, nil
}

// takeFile verifies one mirror file; reason says why it is refused.
func takeFile(f mailboxFile, opts mailbox.VerifyOptions, self proto.PubKey, markRead bool) (history.Restored, string) {
	fh, err := os.Open(f.path)
	if err != nil {
		return history.Restored{}, err.Error()
	}
	defer fh.Close()
	b, err := io.ReadAll(io.LimitReader(fh, maxMailboxFile+1))
	if err != nil {
		return history.Restored{}, err.Error()
	}
	if len(b) > maxMailboxFile {
		return history.Restored{}, fmt.Sprintf("larger than %d bytes", maxMailboxFile)
	}
	v, err := mailbox.Verify(b, opts)
	if err != nil {
		return history.Restored{}, err.Error()
	}
	if _, ok := opts.Roster.Member(v.Signer); !ok {
		return history.Restored{}, fmt.Sprintf("the sender %s is not in the roster", v.Signer.Fingerprint())
	}
	if v.Env.To.Kind != proto.DestChannel && !v.Env.To.Peer.Equal(self) {
		return history.Restored{}, fmt.Sprintf("a direct message to %s, not to this node", v.Env.To.Peer.Fingerprint())
	}
	prio := history.PriorityNormal
	switch v.Priority {
	case "high":
		prio = history.PriorityHigh
	case "low":
		prio = history.PriorityLow
	}
	return history.Restored{Env: v.Env, FromHistory: v.FromHistory, Priority: prio, Delivered: f.delivered, Read: markRead}, ""
}
