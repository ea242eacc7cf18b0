package history

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/proto"
)

// The crash tests re-run the test binary as a child that writes to a
// store and prints an acknowledgement after each durable write. The
// parent kills it with SIGKILL mid-stream and checks the store.
const (
	childEnv   = "HISTORY_TEST_CHILD"
	childDBEnv = "HISTORY_TEST_DB"
)

// TestCrashChild is the child's entry point; it does nothing in a normal
// test run.
func TestCrashChild(t *testing.T) {
	mode := os.Getenv(childEnv)
	if mode == "" {
		t.Skip("only runs as the child of a crash test")
	}
	s, err := Open(os.Getenv(childDBEnv), Config{})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	var out sync.Mutex
	ack := func(format string, args ...any) {
		out.Lock()
		fmt.Fprintf(os.Stdout, format+"\n", args...)
		out.Unlock()
	}
	switch mode {
	case "put":
		// Concurrent writers, as in the receive pipeline, until killed.
		ch := uuid.MustParse(os.Getenv("HISTORY_TEST_CHANNEL"))
		var wg sync.WaitGroup
		for w := range 8 {
			snd := newSender(t, fmt.Sprint("crash", w))
			wg.Go(func() {
				for i := 0; ; i++ {
					se := snd.msg(t, ch, time.Now().UnixMilli(), body(512))
					if _, err := s.Put(se, false); err != nil {
						ack("error %v", err)
						return
					}
					ack("ack %s", se.ID)
				}
			})
		}
		wg.Wait()
	case "counter":
		c, err := OpenSendCounter(s)
		if err != nil {
			ack("error %v", err)
			os.Exit(1)
		}
		dests := []proto.Destination{proto.ToChannel(uuid.MustParse(os.Getenv("HISTORY_TEST_CHANNEL"))), proto.ToOrg("acme")}
		for i := 0; ; i++ {
			d := i % len(dests)
			n, err := c.Next(dests[d])
			if err != nil {
				ack("error %v", err)
				os.Exit(1)
			}
			ack("seq %s %d %d", c.Epoch(), d, n)
		}
	}
	os.Exit(2)
}

// runChild starts the child, hands each stdout line to onLine until it
// returns true, then kills the child with SIGKILL and hands it the lines
// still in the pipe. It returns every line read.
func runChild(t *testing.T, mode, db string, extraEnv []string, stop func(lines []string) bool) []string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+mode, childDBEnv+"="+db)
	cmd.Env = append(cmd.Env, extraEnv...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var lines []string
	killed := false
	sc := bufio.NewScanner(stdout)
	timeout := time.AfterFunc(60*time.Second, func() { cmd.Process.Kill() })
	defer timeout.Stop()
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "error ") {
			t.Errorf("child: %s", line)
		}
		lines = append(lines, line)
		if !killed && stop(lines) {
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			killed = true
		}
	}
	err = cmd.Wait()
	if !killed {
		t.Fatalf("child exited before it was killed: %v", err)
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child was not killed by SIGKILL: %v", err)
	}
	return lines
}

func TestDurabilityAfterSIGKILL(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("spawns a child process")
	}
	db := filepath.Join(t.TempDir(), "crash.db")
	ch := uuid.New()
	lines := runChild(t, "put", db, []string{"HISTORY_TEST_CHANNEL=" + ch.String()}, func(lines []string) bool {
		return len(lines) >= 400
	})
	var acked []uuid.UUID
	for _, l := range lines {
		if id, ok := strings.CutPrefix(l, "ack "); ok {
			acked = append(acked, uuid.MustParse(id))
		}
	}
	s := openAt(t, db, Config{})
	checkDB(t, s)
	for _, id := range acked {
		if _, err := getID(s, id); err != nil {
			t.Errorf("acknowledged envelope %s missing after SIGKILL: %v", id, err)
		}
	}
	st := mustStats(t, s)
	t.Logf("%d acknowledged before SIGKILL; %d stored after reopening", len(acked), st.Channels[ch])
	if st.Channels[ch] < len(acked) {
		t.Errorf("channel holds %d envelopes, fewer than the %d acknowledged", st.Channels[ch], len(acked))
	}
	// The store takes writes again and the child's lock is gone.
	mustPut(t, s, newSender(t, "after").msg(t, ch, time.Now().UnixMilli(), "after the crash"))
}

func TestSendCounterAfterSIGKILL(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("spawns a child process")
	}
	db := filepath.Join(t.TempDir(), "counter.db")
	ch := uuid.New()
	lines := runChild(t, "counter", db, []string{"HISTORY_TEST_CHANNEL=" + ch.String()}, func(lines []string) bool {
		return len(lines) >= 300 // several reservation blocks per destination
	})
	var epoch string
	used := map[int]uint64{}
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) != 4 || f[0] != "seq" {
			continue
		}
		if epoch == "" {
			epoch = f[1]
		} else if f[1] != epoch {
			t.Fatalf("child changed epoch from %s to %s", epoch, f[1])
		}
		d, _ := strconv.Atoi(f[2])
		n, _ := strconv.ParseUint(f[3], 10, 64)
		if n <= used[d] {
			t.Fatalf("child handed out %d after %d for destination %d", n, used[d], d)
		}
		used[d] = n
	}
	if epoch == "" {
		t.Fatal("child printed no sequence numbers")
	}

	s := openAt(t, db, Config{})
	c, err := OpenSendCounter(s)
	if err != nil {
		t.Fatal(err)
	}
	if c.Epoch().String() != epoch || c.Fresh() {
		t.Fatalf("after SIGKILL: epoch %s (fresh %v), want the child's %s", c.Epoch(), c.Fresh(), epoch)
	}
	dests := []proto.Destination{proto.ToChannel(ch), proto.ToOrg("acme")}
	for d, dest := range dests {
		n, err := c.Next(dest)
		if err != nil {
			t.Fatal(err)
		}
		if n <= used[d] {
			t.Errorf("%s: next seq %d after a crash, but %d was used", dest, n, used[d])
		}
		// The child may have taken one more number (and reserved the
		// block above it) without living to print it.
		if n > used[d]+1+s.cfg.SeqReserve {
			t.Errorf("%s: next seq %d after %d leaves a gap wider than the %d reserved", dest, n, used[d], s.cfg.SeqReserve)
		}
		t.Logf("%s: last used %d, resumed at %d", dest, used[d], n)
	}
	// A clean close leaves no gap.
	last, _ := c.Next(dests[0])
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Next(dests[0]); err == nil {
		t.Error("Next after Close succeeded")
	}
	c2, err := OpenSendCounter(s)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := c2.Next(dests[0]); n != last+1 || c2.Epoch().String() != epoch {
		t.Errorf("after a clean close: next %d in %s, want %d in %s", n, c2.Epoch(), last+1, epoch)
	}
	s.Close()

	// A lost store starts a new epoch.
	if err := os.Remove(db); err != nil {
		t.Fatal(err)
	}
	s3 := openAt(t, db, Config{})
	c3, err := OpenSendCounter(s3)
	if err != nil {
		t.Fatal(err)
	}
	if c3.Epoch().String() == epoch || !c3.Fresh() {
		t.Errorf("deleted store: epoch %s (fresh %v), want a new one", c3.Epoch(), c3.Fresh())
	}
	if n, _ := c3.Next(dests[0]); n != 1 {
		t.Errorf("new epoch starts at %d, want 1", n)
	}
}

func TestCountersRoundTrip(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t, Config{})
	if _, _, ok, err := s.LoadCounters(); ok || err != nil {
		t.Fatalf("empty store: ok=%v err=%v", ok, err)
	}
	epoch := proto.NewEpoch()
	last := map[proto.Destination]uint64{
		proto.ToChannel(uuid.New()):                                             7,
		proto.ToPeer(newSender(t, "bob").pub):                                   1 << 40,
		proto.ToOrg("acme"):                                                     3,
		proto.ToOrg(strings.Repeat("o", 128)):                                   9,
		proto.ToPeer(newSender(t, "carol").pub):                                 0,
		proto.ToChannel(uuid.MustParse("00000000-0000-0000-0000-000000000001")): 12,
	}
	if err := s.SaveCounters(epoch, last); err != nil {
		t.Fatal(err)
	}
	e, got, ok, err := s.LoadCounters()
	if err != nil || !ok || e != epoch {
		t.Fatalf("load: epoch %s ok=%v err=%v", e, ok, err)
	}
	if len(got) != len(last) {
		t.Fatalf("load: %d destinations, want %d", len(got), len(last))
	}
	for d, v := range last {
		if got[d] != v {
			t.Errorf("%s: %d, want %d", d, got[d], v)
		}
	}
}
