//go:build linux

package node

import (
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/transport"
)

// fanoutRig is one publisher (node 0, admin) and readers 1..n-1, all
// subscribed to #bench, on loopback TCP.
type fanoutRig struct {
	nodes   []*Node
	mu      sync.Mutex
	lat     []time.Duration // publish→inbox latency of every delivery
	deliver atomic.Int64
}

func newFanoutRig(tb testing.TB, n int) *fanoutRig {
	tb.Helper()
	mt := newTestMesh(tb, n)
	rig := &fanoutRig{}
	for i := 0; i < n; i++ {
		mt.writeRoster(i, mt.roster)
	}
	var seeds []transport.Addr
	for i := 0; i < n; i++ {
		var h *testHooks
		if i > 0 {
			h = &testHooks{deliver: rig.hook}
		}
		nd := mt.startHooked(i, h, nil, seeds...)
		if i == 0 {
			seeds = []transport.Addr{tcpAddr(tb, nd)}
		}
		rig.nodes = append(rig.nodes, nd)
	}
	waitFor(tb, 30*time.Second, "full mesh", func() bool {
		for _, nd := range rig.nodes {
			if len(nd.Backend().PeerList()) != n-1 {
				return false
			}
		}
		return true
	})
	if _, err := rig.nodes[0].chans.CreateChannel(api.CreateChannel{Name: "bench"}); err != nil {
		tb.Fatal(err)
	}
	waitFor(tb, 10*time.Second, "policy everywhere", func() bool {
		for _, nd := range rig.nodes[1:] {
			if _, ok := nd.chans.Set().ByName("bench"); !ok {
				return false
			}
		}
		return true
	})
	for _, nd := range rig.nodes[1:] {
		if _, err := nd.chans.SetSubscription("bench", "subscribed"); err != nil {
			tb.Fatal(err)
		}
	}
	return rig
}

// hook records latency from the nanosecond timestamp in the body.
func (r *fanoutRig) hook(se *proto.SignedEnvelope, at time.Time) {
	if se.Message == nil {
		return
	}
	ns, err := strconv.ParseInt(strings.SplitN(se.Message.Body, " ", 2)[0], 10, 64)
	if err != nil {
		return
	}
	r.mu.Lock()
	r.lat = append(r.lat, at.Sub(time.Unix(0, ns)))
	r.mu.Unlock()
	r.deliver.Add(1)
}

var pad = strings.Repeat("x", 1000)

func (r *fanoutRig) publish(tb testing.TB) {
	_, err := r.nodes[0].out.Send(api.Send{To: "#bench", Body: fmt.Sprintf("%d %s", time.Now().UnixNano(), pad)})
	if err != nil {
		tb.Fatal(err)
	}
}

func (r *fanoutRig) waitDeliveries(tb testing.TB, want int64, within time.Duration) {
	deadline := time.Now().Add(within)
	for r.deliver.Load() < want {
		if time.Now().After(deadline) {
			tb.Fatalf("%d of %d deliveries after %v", r.deliver.Load(), want, within)
		}
		time.Sleep(2 * time.Millisecond) // deliberate: a fine poll inside the timed section
	}
}

func (r *fanoutRig) percentiles() (p50, p99 time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.lat) == 0 {
		return 0, 0
	}
	s := slices.Clone(r.lat)
	slices.Sort(s)
	return s[len(s)/2], s[len(s)*99/100]
}

func (r *fanoutRig) reset() {
	r.mu.Lock()
	r.lat = r.lat[:0]
	r.mu.Unlock()
	r.deliver.Store(0)
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkFanout1x9 publishes 1 KiB channel messages from one node to 9
// subscribed readers as fast as the publisher's queues allow, and reports
// deliveries/s, publish→inbox p50/p99 and CPU per delivery (all 10 nodes
// share this process, so CPU covers signing, verifying, storing for all).
func BenchmarkFanout1x9(b *testing.B) {
	rig := newFanoutRig(b, 10)
	readers := int64(len(rig.nodes) - 1)
	rig.reset()
	runtime.GC()
	cpu0 := cpuTime()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		rig.publish(b)
		// Bound what is in flight so no send queue overflows.
		for int64(i+1)*readers-rig.deliver.Load() > 256*readers {
			time.Sleep(time.Millisecond) // deliberate: paces the publisher inside the timed section; a finer poll's own wake-ups counted against the deliveries (256 messages in flight last far longer)
		}
	}
	rig.waitDeliveries(b, int64(b.N)*readers, 2*time.Minute)
	el := time.Since(start)
	b.StopTimer()
	cpu := cpuTime() - cpu0
	p50, p99 := rig.percentiles()
	d := float64(int64(b.N) * readers)
	b.ReportMetric(d/el.Seconds(), "deliveries/s")
	b.ReportMetric(float64(p50.Microseconds()), "p50-µs")
	b.ReportMetric(float64(p99.Microseconds()), "p99-µs")
	b.ReportMetric(float64(cpu.Microseconds())/d, "cpu-µs/delivery")
}

// BenchmarkFanout1x9Paced offers 100 messages/s and reports latency at
// that light load.
func BenchmarkFanout1x9Paced(b *testing.B) {
	rig := newFanoutRig(b, 10)
	readers := int64(len(rig.nodes) - 1)
	rig.reset()
	cpu0 := cpuTime()
	b.ResetTimer()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for i := 0; i < b.N; i++ {
		<-tick.C
		rig.publish(b)
	}
	rig.waitDeliveries(b, int64(b.N)*readers, time.Minute)
	b.StopTimer()
	cpu := cpuTime() - cpu0
	p50, p99 := rig.percentiles()
	d := float64(int64(b.N) * readers)
	b.ReportMetric(float64(p50.Microseconds()), "p50-µs")
	b.ReportMetric(float64(p99.Microseconds()), "p99-µs")
	b.ReportMetric(float64(cpu.Microseconds())/d, "cpu-µs/delivery")
}
