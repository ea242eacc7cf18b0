//go:build linux

package netnstest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshd/meshd/internal/testwait"
)

func TestMain(m *testing.M) {
	if ok, _ := Available(); ok {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := CleanupStale(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "netnstest: removing stale namespaces:", err)
		}
		cancel()
	}
	os.Exit(m.Run())
}

func skipUnlessAvailable(t *testing.T) {
	t.Helper()
	if ok, why := Available(); !ok {
		t.Skip(why)
	}
}

// echoServer listens on h:0 inside h's namespace and echoes one line per
// connection until the test ends.
func echoServer(t *testing.T, h Host) string {
	t.Helper()
	var ln net.Listener
	if err := h.Do(func() (err error) {
		ln, err = net.Listen("tcp4", net.JoinHostPort(h.IP.String(), "0"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				io.Copy(c, c)
			})
		}
	})
	return ln.Addr().String()
}

// reach dials addr from inside h's namespace and checks an echo round
// trip, all within timeout.
func reach(h Host, addr string, timeout time.Duration) error {
	var c net.Conn
	if err := h.Do(func() (err error) {
		c, err = net.DialTimeout("tcp4", addr, timeout)
		return err
	}); err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	if string(buf) != "ping\n" {
		return fmt.Errorf("echo returned %q", buf)
	}
	return nil
}

func mustReach(t *testing.T, h Host, addr string) {
	t.Helper()
	if err := reach(h, addr, 2*time.Second); err != nil {
		t.Fatalf("host %d -> %s: %v", h.Index, addr, err)
	}
}

func mustNotReach(t *testing.T, h Host, addr string) {
	t.Helper()
	err := reach(h, addr, 300*time.Millisecond)
	if err == nil {
		t.Fatalf("host %d -> %s: connected, want it cut off", h.Index, addr)
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		// A partition must look like one: silence, not a refusal.
		t.Fatalf("host %d -> %s: %v, want a timeout", h.Index, addr, err)
	}
}

func TestAvailable(t *testing.T) {
	t.Parallel()
	ok, why := Available()
	t.Logf("Available() = %v, %q", ok, why)
	if ok != (why == "") {
		t.Fatalf("ok=%v but why=%q", ok, why)
	}
}

func TestNewBridge(t *testing.T) {
	t.Parallel()
	skipUnlessAvailable(t)
	start := time.Now()
	n := NewBridge(t, 3)
	t.Logf("3 hosts up in %v", time.Since(start).Round(time.Millisecond))

	if n.Len() != 3 || len(n.Hosts()) != 3 {
		t.Fatalf("Len %d, Hosts %d; want 3", n.Len(), len(n.Hosts()))
	}
	seen := map[string]bool{}
	for i, h := range n.Hosts() {
		if h.Index != i || !strings.HasPrefix(h.Name, Prefix) || h.Iface != HostIface || len(h.MAC) != 6 {
			t.Errorf("host %d: %+v", i, h)
		}
		if !n.Subnet().Contains(h.IP) || seen[h.IP.String()] {
			t.Errorf("host %d: IP %v not unique in %v", i, h.IP, n.Subnet())
		}
		seen[h.IP.String()] = true
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h := n.Host(1)
	out, err := h.Command(ctx, "ip", "-4", "route", "show").CombinedOutput()
	if err != nil {
		t.Fatalf("Command: %v: %s", err, out)
	}
	if !strings.Contains(string(out), "224.0.0.0/4 dev eth0") {
		t.Errorf("no multicast route in host 1:\n%s", out)
	}
	out, err = h.Command(ctx, "ip", "-br", "addr", "show", "dev", "lo").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "UNKNOWN") {
		t.Errorf("loopback in host 1 not up: %v: %s", err, out)
	}

	// Everyone reaches everyone, including itself.
	addrs := make([]string, n.Len())
	for i := range n.Len() {
		addrs[i] = echoServer(t, n.Host(i))
	}
	for _, from := range n.Hosts() {
		for _, to := range addrs {
			mustReach(t, from, to)
		}
	}
}

func TestWithoutMulticastRoute(t *testing.T) {
	t.Parallel()
	skipUnlessAvailable(t)
	n := NewBridge(t, 1, WithoutMulticastRoute())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := n.Host(0).Command(ctx, "ip", "-4", "route", "show").CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if strings.Contains(string(out), "224.0.0.0") {
		t.Errorf("multicast route present:\n%s", out)
	}
}

func TestPartitionAndHeal(t *testing.T) {
	t.Parallel()
	skipUnlessAvailable(t)
	n := NewBridge(t, 3)
	a0, a1 := echoServer(t, n.Host(0)), echoServer(t, n.Host(1))
	mustReach(t, n.Host(0), a1)

	if err := n.Partition(0, 1); err != nil {
		t.Fatal(err)
	}
	mustNotReach(t, n.Host(0), a1)
	mustNotReach(t, n.Host(1), a0)
	mustReach(t, n.Host(2), a0)
	mustReach(t, n.Host(2), a1)

	if err := n.Heal(0, 1); err != nil {
		t.Fatal(err)
	}
	mustReach(t, n.Host(0), a1)
	mustReach(t, n.Host(1), a0)
	if err := n.Heal(0, 1); err != nil {
		t.Fatalf("second Heal: %v", err)
	}
	if err := n.Partition(1, 1); err == nil {
		t.Error("Partition(1, 1) succeeded")
	}
	if err := n.Partition(0, 3); err == nil {
		t.Error("Partition(0, 3) succeeded with 3 hosts")
	}
}

func TestIsolateAndReconnect(t *testing.T) {
	t.Parallel()
	skipUnlessAvailable(t)
	n := NewBridge(t, 3)
	a0, a1 := echoServer(t, n.Host(0)), echoServer(t, n.Host(1))

	if err := n.Isolate(1); err != nil {
		t.Fatal(err)
	}
	mustNotReach(t, n.Host(0), a1)
	mustNotReach(t, n.Host(1), a0)
	mustReach(t, n.Host(2), a0)

	if err := n.Reconnect(1); err != nil {
		t.Fatal(err)
	}
	mustReach(t, n.Host(0), a1)
	mustReach(t, n.Host(1), a0)
}

func TestCleanupRemovesNamespaces(t *testing.T) {
	skipUnlessAvailable(t)
	var names []string
	var pid int
	// Not cancelled by the subtest: the process must die by cleanup, not
	// by its context.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	t.Run("net", func(t *testing.T) {
		n := NewBridge(t, 2)
		names = append(names, n.Switch())
		for _, h := range n.Hosts() {
			names = append(names, h.Name)
		}
		// A process left running in a host must not keep it alive.
		// The shell says when it runs, which proves ip has entered the
		// namespace, then becomes sleep.
		cmd := n.Host(0).Command(ctx, "sh", "-c", "echo in; exec sleep 30")
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pid = cmd.Process.Pid
		if _, err := io.ReadFull(stdout, make([]byte, 3)); err != nil {
			t.Fatalf("reading from the process: %v", err)
		}
		// Reap it once cleanup has killed it.
		go cmd.Wait()
	})
	for _, name := range names {
		if _, err := os.Stat(netnsDir + "/" + name); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("namespace %s survived cleanup (stat: %v)", name, err)
		}
	}
	if !testwait.Until(5*time.Second, func() bool { return !processAlive(pid) || isZombie(pid) }) {
		t.Fatalf("process %d in a removed namespace still runs", pid)
	}
}

func isZombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return strings.HasPrefix(rest, "Z")
}

func TestCleanupStale(t *testing.T) {
	skipUnlessAvailable(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// No process has a pid above pid_max (at most 2^22), so this name
	// belongs to a run that is gone.
	stale := fmt.Sprintf("%s%d-1-sw", Prefix, 1<<30)
	live := fmt.Sprintf("%s%d-999-sw", Prefix, os.Getpid())
	for _, name := range []string{stale, live} {
		if err := run(ctx, "ip", "netns", "add", name); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { removeNamespace(context.Background(), name, false) })
	}
	if err := CleanupStale(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(netnsDir + "/" + stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale namespace %s survived (stat: %v)", stale, err)
	}
	if _, err := os.Stat(netnsDir + "/" + live); err != nil {
		t.Errorf("namespace %s of this live process was removed: %v", live, err)
	}
}

func TestCommandTimeout(t *testing.T) {
	t.Parallel()
	skipUnlessAvailable(t)
	n := NewBridge(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := n.Host(0).Command(ctx, "sleep", "10").Run()
	t.Logf("killed after %v", time.Since(start))
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("Run: %v, want the process killed", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("command ran %v past its 200ms context", d)
	}
}
