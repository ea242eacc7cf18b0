//go:build linux

// Package netnstest builds small switched networks out of Linux network
// namespaces, so tests can run several meshd hosts on one machine with real
// sockets, real multicast and real partitions.
//
// A [Net] is one "switch" namespace holding a bridge, plus n host
// namespaces, each wired to the bridge by a veth pair. Host i sees its end
// as eth0 with address 10.231.N.(i+1)/24, where N is random per [Net], and
// has loopback up and a 224.0.0.0/4 route on eth0 (mDNS needs it; see
// [WithoutMulticastRoute]). Nothing is created in the root namespace: the
// bridge and the switch ends of the veths live in the switch namespace, so
// parallel tests and runs never clash on interface names.
//
// Namespaces are named "meshdt-<pid>-<seq>-sw" and "meshdt-<pid>-<seq>-h<i>".
// Everything is removed in t.Cleanup, also when the test fails, and
// [CleanupStale] removes what a killed run left behind.
//
// Tests call [Available] first and skip when it says no: the package needs
// root, the ip command and permission to create namespaces.
//
//	if ok, why := netnstest.Available(); !ok {
//		t.Skip(why)
//	}
//	n := netnstest.NewBridge(t, 3)
//	cmd := n.Host(0).Command(ctx, os.Args[0], "-test.run=^TestHelper$")
package netnstest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Prefix starts the name of every namespace this package creates.
const Prefix = "meshdt-"

// HostIface is the name of each host's interface to the switch.
const HostIface = "eth0"

// cmdTimeout bounds every ip command. They take milliseconds; the bound is
// there so a wedged kernel or a stuck lock fails the test instead of
// hanging it.
const cmdTimeout = 10 * time.Second

// bogusMAC is the link-layer address [Net.Partition] pins a peer's IP to.
// It is unicast, locally administered and assigned to nobody, so frames
// sent to it are flooded by the bridge and dropped by every host.
const bogusMAC = "02:00:00:6d:73:68"

// netnsDir is where ip netns keeps its namespace handles.
const netnsDir = "/run/netns"

var seq atomic.Uint64

var (
	availOnce sync.Once
	availOK   bool
	availWhy  string
)

// Available reports whether namespaces can be created here: the process
// must be root, the ip command must exist and "ip netns add" must work.
// When it cannot, why says what is missing, ready for t.Skip. The probe
// runs once per process.
func Available() (ok bool, why string) {
	availOnce.Do(func() { availOK, availWhy = probe() })
	return availOK, availWhy
}

func probe() (bool, string) {
	if runtime.GOOS != "linux" {
		return false, "netnstest: network namespaces need Linux"
	}
	if os.Geteuid() != 0 {
		return false, "netnstest: network namespaces need root"
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return false, "netnstest: the ip command (iproute2) is not installed"
	}
	name := fmt.Sprintf("%s%d-probe", Prefix, os.Getpid())
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	if err := run(ctx, "ip", "netns", "add", name); err != nil {
		return false, fmt.Sprintf("netnstest: cannot create a network namespace: %v", err)
	}
	if err := run(ctx, "ip", "netns", "delete", name); err != nil {
		return false, fmt.Sprintf("netnstest: cannot delete a network namespace: %v", err)
	}
	return true, ""
}

// Option adjusts [NewBridge].
type Option func(*options)

type options struct {
	noMulticastRoute bool
}

// WithoutMulticastRoute leaves out the 224.0.0.0/4 route in the hosts, for
// tests of how discovery copes without one. Such a host has no route that
// covers the mDNS group, so joining it without naming an interface fails
// with ENODEV.
func WithoutMulticastRoute() Option {
	return func(o *options) { o.noMulticastRoute = true }
}

// Net is a bridge with hosts attached. Its methods may be called from any
// goroutine.
type Net struct {
	id     string // "meshdt-<pid>-<seq>"
	sw     string // switch namespace
	subnet *net.IPNet
	hosts  []Host
}

// Host is one namespace on a [Net].
type Host struct {
	// Name is the namespace name, as used by "ip netns exec".
	Name string
	// Index is the host's position on its Net.
	Index int
	// IP is the host's IPv4 address on the bridge.
	IP net.IP
	// Iface is the host's interface to the bridge: always [HostIface].
	Iface string
	// MAC is Iface's link-layer address.
	MAC net.HardwareAddr

	port string // the switch end of the veth, in the switch namespace
}

// NewBridge creates a switch namespace with a bridge and n hosts attached
// to it, all links up, and registers their removal with t.Cleanup. It
// fails the test if anything goes wrong. Call [Available] first. Hosts
// take .1 to .n of the Net's /24, so n is at most 254.
func NewBridge(t testing.TB, n int, opts ...Option) *Net {
	t.Helper()
	if n < 1 || n > 254 {
		t.Fatalf("netnstest: %d hosts; want 1..254", n)
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	id := fmt.Sprintf("%s%d-%d", Prefix, os.Getpid(), seq.Add(1))
	third := rand.IntN(256)
	nw := &Net{
		id:     id,
		sw:     id + "-sw",
		subnet: &net.IPNet{IP: net.IPv4(10, 231, byte(third), 0).To4(), Mask: net.CIDRMask(24, 32)},
	}
	// Register cleanup before creating anything, so a failure half way
	// still removes what exists.
	t.Cleanup(func() {
		if err := nw.destroy(); err != nil {
			t.Errorf("netnstest: cleanup: %v", err)
		}
	})
	if err := nw.build(n, o); err != nil {
		t.Fatalf("netnstest: %v", err)
	}
	return nw
}

func (nw *Net) build(n int, o options) error {
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout+time.Duration(n)*time.Second)
	defer cancel()
	sw := []string{
		"link set lo up",
		"link add br0 type bridge stp_state 0 forward_delay 0 mcast_snooping 0",
		"link set br0 up",
	}
	if err := run(ctx, "ip", "netns", "add", nw.sw); err != nil {
		return err
	}
	if err := batch(ctx, nw.sw, sw); err != nil {
		return err
	}
	for i := range n {
		h := Host{
			Name:  fmt.Sprintf("%s-h%d", nw.id, i),
			Index: i,
			IP:    net.IPv4(10, 231, nw.subnet.IP[2], byte(i+1)).To4(),
			Iface: HostIface,
			port:  fmt.Sprintf("p%d", i),
		}
		if err := run(ctx, "ip", "netns", "add", h.Name); err != nil {
			return err
		}
		nw.hosts = append(nw.hosts, h)
		if err := batch(ctx, nw.sw, []string{
			fmt.Sprintf("link add %s type veth peer name %s netns %s", h.port, h.Iface, h.Name),
			fmt.Sprintf("link set %s master br0", h.port),
			fmt.Sprintf("link set %s up", h.port),
		}); err != nil {
			return err
		}
		cmds := []string{
			"link set lo up",
			fmt.Sprintf("addr add %s/24 dev %s", h.IP, h.Iface),
			fmt.Sprintf("link set %s up", h.Iface),
		}
		if !o.noMulticastRoute {
			cmds = append(cmds, fmt.Sprintf("route add 224.0.0.0/4 dev %s", h.Iface))
		}
		if err := batch(ctx, h.Name, cmds); err != nil {
			return err
		}
		mac, err := hostMAC(ctx, h)
		if err != nil {
			return err
		}
		nw.hosts[i].MAC = mac
	}
	return nil
}

func hostMAC(ctx context.Context, h Host) (net.HardwareAddr, error) {
	out, err := output(ctx, "ip", "-n", h.Name, "-br", "link", "show", "dev", h.Iface)
	if err != nil {
		return nil, err
	}
	// "eth0@if3  UP  c2:5a:ed:5d:7b:4c <BROADCAST,...>"
	f := strings.Fields(string(out))
	if len(f) < 3 {
		return nil, fmt.Errorf("unexpected ip link output %q", out)
	}
	return net.ParseMAC(f[2])
}

// destroy kills whatever still runs in the namespaces and deletes them.
// The veth pairs and the bridge go with their namespaces.
func (nw *Net) destroy() error {
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	names := make([]string, 0, len(nw.hosts)+1)
	for _, h := range nw.hosts {
		names = append(names, h.Name)
	}
	names = append(names, nw.sw)
	var errs []error
	for _, name := range names {
		if err := removeNamespace(ctx, name, true); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeNamespace deletes a namespace; with kill, it first kills the
// processes inside (started there by the test that owns it, so that none
// keeps the namespace alive). A namespace that is already gone is not an
// error.
func removeNamespace(ctx context.Context, name string, kill bool) error {
	if _, err := os.Stat(netnsDir + "/" + name); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if !kill {
		return run(ctx, "ip", "netns", "delete", name)
	}
	if out, err := output(ctx, "ip", "netns", "pids", name); err == nil {
		for _, f := range strings.Fields(string(out)) {
			if pid, err := strconv.Atoi(f); err == nil && pid > 1 && pid != os.Getpid() {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	return run(ctx, "ip", "netns", "delete", name)
}

// CleanupStale deletes the namespaces left behind by earlier runs: those
// with [Prefix] whose creating process is gone. Namespaces of live
// processes, this one included, are left alone, so concurrent runs are
// safe. Processes still inside a stale namespace are not touched; the
// namespace itself lives on, nameless, until they exit. Call it from
// TestMain when a killed run may have leaked namespaces.
func CleanupStale(ctx context.Context) error {
	if ok, why := Available(); !ok {
		return errors.New(why)
	}
	out, err := output(ctx, "ip", "netns", "list")
	if err != nil {
		return err
	}
	var errs []error
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line) // "name (id: 3)"
		if len(f) == 0 || !strings.HasPrefix(f[0], Prefix) {
			continue
		}
		name := f[0]
		pidText, _, _ := strings.Cut(strings.TrimPrefix(name, Prefix), "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid <= 0 || pid == os.Getpid() || processAlive(pid) {
			continue
		}
		if err := removeNamespace(ctx, name, false); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// Name returns the name prefix shared by the Net's namespaces.
func (nw *Net) Name() string { return nw.id }

// Switch returns the name of the namespace that holds the bridge.
func (nw *Net) Switch() string { return nw.sw }

// Subnet returns the Net's IPv4 /24.
func (nw *Net) Subnet() *net.IPNet {
	return &net.IPNet{IP: append(net.IP(nil), nw.subnet.IP...), Mask: nw.subnet.Mask}
}

// Len returns the number of hosts.
func (nw *Net) Len() int { return len(nw.hosts) }

// Host returns host i. It panics if i is out of range.
func (nw *Net) Host(i int) Host { return nw.hosts[i] }

// Hosts returns all hosts in order.
func (nw *Net) Hosts() []Host { return append([]Host(nil), nw.hosts...) }

// Isolate cuts host i off the bridge by setting the switch end of its veth
// down. Everything to and from the host is lost, silently, as on a pulled
// cable; its own interface and routes stay configured (they show
// "linkdown"), so [Net.Reconnect] restores it as it was.
func (nw *Net) Isolate(i int) error {
	return nw.setPort(i, "down")
}

// Reconnect undoes [Net.Isolate].
func (nw *Net) Reconnect(i int) error {
	return nw.setPort(i, "up")
}

func (nw *Net) setPort(i int, state string) error {
	h, err := nw.host(i)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	return run(ctx, "ip", "-n", nw.sw, "link", "set", h.port, state)
}

// Partition cuts IPv4 unicast between hosts i and j in both directions,
// silently: each host's neighbour entry for the other is pinned to a
// link-layer address nobody owns, so connections time out as on a real
// partition rather than failing fast. Multicast (mDNS queries) and IPv6
// still pass, and both hosts keep talking to everyone else. The kernel here
// lacks the tc and netfilter pieces for a link-layer filter; this needs
// only ip.
func (nw *Net) Partition(i, j int) error {
	return nw.pair(i, j, func(a, b Host) []string {
		return []string{"ip", "-n", a.Name, "neigh", "replace", b.IP.String(),
			"lladdr", bogusMAC, "dev", a.Iface, "nud", "permanent"}
	})
}

// Heal undoes [Net.Partition]: it removes the pinned entries, and the
// hosts resolve each other again with ARP. Healing hosts that are not
// partitioned does nothing.
func (nw *Net) Heal(i, j int) error {
	return nw.pair(i, j, func(a, b Host) []string {
		return []string{"ip", "-n", a.Name, "neigh", "flush", "to", b.IP.String(), "dev", a.Iface, "nud", "permanent"}
	})
}

func (nw *Net) pair(i, j int, cmd func(a, b Host) []string) error {
	a, err := nw.host(i)
	if err != nil {
		return err
	}
	b, err := nw.host(j)
	if err != nil {
		return err
	}
	if i == j {
		return fmt.Errorf("netnstest: cannot partition host %d from itself", i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	for _, args := range [][]string{cmd(a, b), cmd(b, a)} {
		if err := run(ctx, args[0], args[1:]...); err != nil {
			return err
		}
	}
	return nil
}

func (nw *Net) host(i int) (Host, error) {
	if i < 0 || i >= len(nw.hosts) {
		return Host{}, fmt.Errorf("netnstest: host %d out of range (have %d)", i, len(nw.hosts))
	}
	return nw.hosts[i], nil
}

// Command returns a command that runs name with args inside the host's
// namespace ("ip netns exec"). ip execs the program in place, so killing
// the command (when ctx ends) kills the program itself. Pass a ctx with a
// deadline: it is the command's only time bound.
func (h Host) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", h.Name, name}, args...)...)
	cmd.WaitDelay = 2 * time.Second
	return cmd
}

// Do runs fn on an OS thread switched into the host's namespace and
// switches back afterwards. Sockets fn creates (net.Listen, net.Dial)
// belong to the namespace for their whole life and can be used from any
// goroutine afterwards. Goroutines fn starts do not run in the namespace,
// and name lookups may run elsewhere, so use IP literals inside fn.
func (h Host) Do(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("netnstest: %w", err)
			return
		}
		defer orig.Close()
		target, err := os.Open(netnsDir + "/" + h.Name)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("netnstest: %w", err)
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("netnstest: setns %s: %w", h.Name, err)
			return
		}
		ferr := fn()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			// Stay locked: the runtime then ends this thread with the
			// goroutine instead of reusing it in the wrong namespace.
			errc <- fmt.Errorf("netnstest: cannot switch back from %s: %w", h.Name, err)
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// batch runs ip commands in namespace ns in one ip process.
func batch(ctx context.Context, ns string, cmds []string) error {
	cmd := exec.CommandContext(ctx, "ip", "-n", ns, "-batch", "-")
	cmd.Stdin = strings.NewReader(strings.Join(cmds, "\n") + "\n")
	return runCmd(cmd)
}

func run(ctx context.Context, name string, args ...string) error {
	return runCmd(exec.CommandContext(ctx, name, args...))
}

func runCmd(cmd *exec.Cmd) error {
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(cmd.Args, " "), err, bytes.TrimSpace(out.Bytes()))
	}
	return nil
}

func output(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.WaitDelay = time.Second
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %s", strings.Join(cmd.Args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return out, nil
}
