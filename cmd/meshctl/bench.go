package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/home"
	"github.com/meshd/meshd/proto"
)

const usageBench = `usage: meshctl bench --readers HOME[,HOME...] --channel NAME [--publisher HOME]
                    [--rate N] [--duration D] [--size BYTES] [--drain D]
                    [--concurrency N] [--json]

Drive a running mesh through the control sockets of its nodes and measure
it. The publisher (default: --home) sends messages to channel NAME for
duration D, at N messages per second (0: as fast as it takes them).

A delivery is the message's file in the reader's mailbox: each reader's
inbox directories are watched with inotify from before the first send, and
a delivery's latency is the time its file appeared there minus the time
the publisher was asked to send it. Every reader must be on this host, so
all share one clock; bench asks the readers nothing while it sends. Each
body is BYTES long and starts with "bench RUN SEQ SENT_UNIX_NANO".

Reports: messages offered (sent) and the rate, deliveries (expected: every
message at every reader) and those missing after the drain period,
publish→mailbox file latency (p50, p90, p99, max), CPU seconds of every
meshd (utime+stime from /proc, found through the pid in each home's
meshd.lock) per delivery, peak RSS (VmHWM) per node, and the drop counters
of each node that changed during the run (status counters whose name says
drop, fail or refused, and link.down). Should the kernel drop file events
(an inotify queue overflow), the inbox directories are read after the
drain: the files found then count as delivered, but not in the latency.

Each reader takes at most its channel quota from one sender
(channel_sender_rate, 600 a minute after a burst of channel_sender_burst,
2,000; see docs/meshd.toml) and refuses the rest (drop.quota, listed
with the drop counters): to measure a real mesh past it, raise it on the
readers. The nodes of meshctl demo have no such quota.

Readers not subscribed to the channel are subscribed first (a muted
subscription counts: muted items reach the inbox too). The channel must
exist and the publisher must be one of its writers.

flags:
  --publisher HOME      the home of the node that sends (default: --home)
  --readers HOME,...    the homes of the nodes that read, comma-separated
  --channel NAME        the channel (with or without '#')
  --rate N              messages per second; 0 sends as fast as possible (default 100)
  --duration D          how long to send (default 10s)
  --size BYTES          message body size (default 1024)
  --drain D             how long to wait for deliveries after the last send (default 5s)
  --concurrency N       sends in flight at most (default rate/10, from 8 to 128; 128 with --rate 0)

examples:
  meshctl bench --publisher /srv/a --readers /srv/b,/srv/c --channel bench --rate 100 --duration 10s
  meshctl bench --publisher /srv/a --readers /srv/b,/srv/c --channel bench --rate 0 --json
`

// Bench limits.
const (
	benchMinSize        = 64 // room for the header "bench RUN SEQ NANOS "
	benchMaxDuration    = time.Hour
	benchMaxConcurrency = 256
	// benchDrainPoll is how often the drain looks for the files still
	// missing.
	benchDrainPoll = 20 * time.Millisecond
	// benchSettle is the pause after subscribing readers: the catch-up
	// round a subscription starts runs within half a second.
	benchSettle = time.Second
)

// latencyStats summarises latencies in milliseconds.
type latencyStats struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
}

// benchNodeResult is what bench reports of one node.
type benchNodeResult struct {
	Home       string  `json:"home"`
	Name       string  `json:"name,omitempty"`
	Role       string  `json:"role"` // publisher or reader
	PID        int     `json:"pid,omitempty"`
	SharedPID  bool    `json:"shared_pid,omitempty"` // another node runs in the same process
	CPUSeconds float64 `json:"cpu_seconds"`
	PeakRSSMiB float64 `json:"peak_rss_mib"` // VmHWM: the process's peak, not only this run's
	RSSMiB     float64 `json:"rss_mib"`      // VmRSS at the end
	// AnonMiB and FileMiB split RSSMiB: the heap and stacks, and mapped
	// files (the history store is one, mapped whole, so it grows with
	// the store).
	AnonMiB float64 `json:"rss_anon_mib"`
	FileMiB float64 `json:"rss_file_mib"`
	// Readers only: mailbox files of the run's messages, those not
	// there after the drain, those found only by reading the inbox after
	// an overflow of file events (not timed), and more than one file for
	// a message.
	Delivered  int `json:"delivered"`
	Missing    int `json:"missing"`
	Untimed    int `json:"untimed,omitempty"`
	NotHanded  int `json:"not_handed,omitempty"` // sends whose sent_to lacked this reader (publisher queue full or no link)
	Duplicates int `json:"duplicates,omitempty"`
	// RxDelivered is how much the reader's rx.delivered.message counter
	// grew: every channel message it stored, the run's and any other.
	RxDelivered uint64 `json:"rx_delivered_message,omitempty"`
	// RxCommits is how much the reader's rx.commits counter grew: the
	// batches its receive stage committed. RxDelivered/RxCommits is the
	// average batch, which sets how many fsyncs a delivery costs.
	RxCommits uint64 `json:"rx_commits,omitempty"`
	// Drops are the counters that changed during the run and name a drop
	// or a failure, by name.
	Drops map[string]uint64 `json:"drops,omitempty"`
}

// benchResult is the report of one bench run.
type benchResult struct {
	Channel          string  `json:"channel"`
	Readers          int     `json:"readers"`
	Rate             int     `json:"rate"` // target messages/s; 0: as fast as possible
	DurationSeconds  float64 `json:"duration_seconds"`
	Size             int     `json:"size"`
	Concurrency      int     `json:"concurrency"`
	Sent             int     `json:"sent"`
	SendErrors       int     `json:"send_errors"`
	FirstSendError   string  `json:"first_send_error,omitempty"`
	OfferedPerSecond float64 `json:"offered_per_second"`
	Expected         int     `json:"expected"` // sent × readers
	Delivered        int     `json:"delivered"`
	Missing          int     `json:"missing"`
	Duplicates       int     `json:"duplicates"`
	DeliveredRatio   float64 `json:"delivered_ratio"`
	// DeliveriesPerSecond is deliveries over the time from the first send
	// to the last delivery.
	DeliveriesPerSecond float64 `json:"deliveries_per_second"`
	// DrainSeconds is the time from the last send to the last delivery.
	DrainSeconds float64 `json:"drain_seconds"`
	// Latency is publish→mailbox file: when the file appeared in the
	// reader's inbox directory (inotify) minus when the publisher was
	// asked to send. Untimed deliveries are not in it.
	Latency latencyStats `json:"latency"`
	Untimed int          `json:"untimed"`
	// SendLatency is how long one control-API send took (sign, store,
	// hand to the links).
	SendLatency latencyStats `json:"send_latency"`
	// CPUSeconds is the utime+stime of every meshd process during the
	// run (the window of WallSeconds), each process counted once.
	CPUSeconds       float64 `json:"cpu_seconds"`
	CPUUserSeconds   float64 `json:"cpu_user_seconds"`
	CPUSystemSeconds float64 `json:"cpu_system_seconds"`
	CPUPerDeliveryUS float64 `json:"cpu_us_per_delivery"`
	// The host during the run (from the first send to the end of the
	// drain and of the mailbox checks, since the mirror's catch-up is
	// delivery work too): its CPUs, the CPU time all of them spent busy
	// split into meshd, this bench process and everything else, and the
	// 1-minute load average before and after. Figures taken while other
	// work runs say as much about the host as about meshd.
	CPUs            int               `json:"cpus"`
	WallSeconds     float64           `json:"wall_seconds"`
	HostCPUSeconds  float64           `json:"host_cpu_seconds"`
	BenchCPUSeconds float64           `json:"bench_cpu_seconds"`
	OtherCPUSeconds float64           `json:"other_cpu_seconds"`
	Load1Before     float64           `json:"load1_before"`
	Load1After      float64           `json:"load1_after"`
	Nodes           []benchNodeResult `json:"nodes"`
	Notes           []string          `json:"notes,omitempty"`
}

// benchOptions are the parsed flags.
type benchOptions struct {
	publisher   string
	readers     []string
	channel     string
	rate        int
	duration    time.Duration
	size        int
	drain       time.Duration
	concurrency int
}

// benchFlags are the flags of 'meshctl bench'.
type benchFlags struct {
	publisher   string
	readers     string
	chName      string
	rate        int
	duration    time.Duration
	size        int
	drain       time.Duration
	concurrency int
}

func (fl *benchFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&fl.publisher, "publisher", "", "")
	fs.StringVar(&fl.readers, "readers", "", "")
	fs.StringVar(&fl.chName, "channel", "", "")
	fs.IntVar(&fl.rate, "rate", 100, "")
	fs.DurationVar(&fl.duration, "duration", 10*time.Second, "")
	fs.IntVar(&fl.size, "size", 1024, "")
	fs.DurationVar(&fl.drain, "drain", 5*time.Second, "")
	fs.IntVar(&fl.concurrency, "concurrency", 0, "")
}

func runBench(a *app, fl *benchFlags, pos []string) error {
	err := a.nargs(pos, 0, 0)
	if err != nil {
		return err
	}
	o := benchOptions{rate: fl.rate, duration: fl.duration, size: fl.size, drain: fl.drain, concurrency: fl.concurrency}
	if fl.publisher != "" {
		o.publisher = home.Open(fl.publisher).Dir
	} else {
		o.publisher = a.home().Dir
	}
	for _, r := range splitList(fl.readers) {
		o.readers = append(o.readers, home.Open(r).Dir)
	}
	switch {
	case len(o.readers) == 0:
		return a.usageErrorf("missing --readers HOME[,HOME...]")
	case fl.chName == "":
		return a.usageErrorf("missing --channel NAME")
	case o.rate < 0:
		return a.usageErrorf("--rate must not be negative")
	case o.duration <= 0 || o.duration > benchMaxDuration:
		return a.usageErrorf("--duration must be above 0 and at most %v", benchMaxDuration)
	case o.size < benchMinSize || o.size > proto.MaxBodySize:
		return a.usageErrorf("--size must be from %d to %d", benchMinSize, proto.MaxBodySize)
	case o.drain < 0 || o.drain > benchMaxDuration:
		return a.usageErrorf("--drain must be from 0 to %v", benchMaxDuration)
	case o.concurrency < 0 || o.concurrency > benchMaxConcurrency:
		return a.usageErrorf("--concurrency must be from 1 to %d", benchMaxConcurrency)
	}
	if slices.Contains(o.readers, o.publisher) {
		return a.usageErrorf("the publisher %s is also a reader: a node does not deliver its own messages to its inbox", o.publisher)
	}
	if len(slices.Compact(slices.Sorted(slices.Values(o.readers)))) != len(o.readers) {
		return a.usageErrorf("--readers names a home twice")
	}
	if o.concurrency == 0 {
		o.concurrency = defaultBenchConcurrency(o.rate)
	}
	if o.channel, err = a.channelArg(fl.chName); err != nil {
		return err
	}
	res, err := runBenchLoad(context.Background(), o)
	if err != nil {
		return a.remoteErr(err)
	}
	if a.json {
		return a.printJSON(res)
	}
	return writeBenchText(a, res)
}

// defaultBenchConcurrency is the number of sends in flight for a rate. A
// paced run needs about rate × send latency, and a send waits for the
// publisher's store commit: milliseconds, but 50-60 ms once the host is
// busy at 1,000 sends/s. So it is 100 ms' worth of messages, at least 8
// and at most 128; with 50 ms' worth, a run at 1,000/s offered only
// 900-925/s, the generator's window and not the publisher being the
// limit. Sending as fast as possible, it is 128: with 64 the host was only
// 81-98% busy, and 128 keeps it busy and the readers' commits larger; more
// raises each node's memory for little.
func defaultBenchConcurrency(rate int) int {
	if rate == 0 {
		return 128
	}
	return min(max(rate/10, 8), 128)
}

// splitList splits a comma-separated list, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

// benchNode is one node of a run.
type benchNode struct {
	home   home.Home
	role   string
	c      *api.Client
	name   string
	fp     string // fingerprint, as in api.Sent.SentTo
	pid    int
	cpu0   cpuTime
	before map[string]uint64

	// Readers: the mailbox watch and what runBenchLoad found in it.
	mw        *mailboxWatch
	pending   []int // seqs whose file has not appeared
	delivered int
	untimed   int
	lat       []time.Duration
	lastAt    time.Time
	notHanded atomic.Int64
}

// benchRun is the state shared by a run's goroutines.
type benchRun struct {
	o      benchOptions
	runID  string
	prefix string // "bench RUN "
	start  time.Time

	mu       sync.Mutex
	sent     int             // guarded by mu: sends meshd accepted
	ids      []string        // guarded by mu: envelope id by seq, "" for a failed send
	sentAt   []time.Time     // guarded by mu: when each seq's send began
	sendLat  []time.Duration // guarded by mu
	sendErrs int             // guarded by mu
	firstErr string          // guarded by mu
	lastSend time.Time       // guarded by mu: when the last accepted send returned
}

// runBenchLoad runs one bench against the nodes at o's homes.
func runBenchLoad(ctx context.Context, o benchOptions) (*benchResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	idb := make([]byte, 4)
	if _, err := rand.Read(idb); err != nil {
		return nil, err
	}
	r := &benchRun{o: o, runID: hex.EncodeToString(idb)}
	r.prefix = "bench " + r.runID + " "
	res := &benchResult{Channel: o.channel, Readers: len(o.readers), Rate: o.rate, DurationSeconds: o.duration.Seconds(),
		Size: o.size, Concurrency: o.concurrency}
	note := func(format string, args ...any) { res.Notes = append(res.Notes, fmt.Sprintf(format, args...)) }

	// The nodes: status, pid, channel access.
	var nodes []*benchNode
	subscribed := false
	for i, h := range append([]string{o.publisher}, o.readers...) {
		n := &benchNode{home: home.Home{Dir: h}, role: "reader"}
		if i == 0 {
			n.role = "publisher"
		}
		n.c = api.NewClient(n.home.ControlSocket())
		cctx, ccancel := context.WithTimeout(ctx, api.DefaultTimeout)
		st, err := n.c.Status(cctx)
		if err == nil {
			var ch *api.Channel
			ch, err = n.c.Channel(cctx, o.channel)
			switch {
			case err != nil:
				err = fmt.Errorf("%s: %w", h, err)
			case n.role == "publisher" && !ch.CanWrite:
				err = fmt.Errorf("%s may not write #%s (writers: %s)", h, o.channel, strings.Join(ch.Writers, ", "))
			case n.role == "reader" && !ch.CanRead:
				err = fmt.Errorf("%s may not read #%s (readers: %s)", h, o.channel, strings.Join(ch.Readers, ", "))
			case n.role == "reader" && ch.Subscription == "unsubscribed":
				if _, err = n.c.Subscribe(cctx, api.Subscribe{Channel: o.channel, State: "subscribed"}); err == nil {
					note("subscribed %s to #%s", h, o.channel)
					subscribed = true
				}
			}
		}
		ccancel()
		if err != nil {
			return nil, err
		}
		n.name, n.fp = st.Name, st.Fingerprint
		if pid, err := lockPID(n.home); err == nil {
			n.pid = pid
		} else {
			note("no pid for %s (%v): no CPU or RSS figures for it", h, err)
		}
		nodes = append(nodes, n)
	}
	pub, readers := nodes[0], nodes[1:]
	if subscribed {
		// Subscribing starts a catch-up round on the reader; let it pass
		// before measuring.
		time.Sleep(benchSettle)
	}
	pidCount := map[int]int{}
	for _, n := range nodes {
		if n.pid != 0 {
			pidCount[n.pid]++
		}
	}
	for _, pid := range slices.Sorted(maps.Keys(pidCount)) {
		if k := pidCount[pid]; k > 1 {
			note("%d nodes share process %d: their CPU and RSS are that process's, counted once", k, pid)
		}
	}
	if pl, err := peersOf(ctx, pub.c); err == nil {
		for _, n := range readers {
			if !pl[n.fp] {
				note("reader %s is not linked to the publisher", n.home.Dir)
			}
		}
	}

	// Watch every reader's mailbox before the first send.
	for _, n := range readers {
		mw, err := watchMailbox(n.home.MailboxDir())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n.home.Dir, err)
		}
		n.mw = mw
		defer mw.close()
	}
	for _, n := range nodes {
		cctx, ccancel := context.WithTimeout(ctx, api.DefaultTimeout)
		st, err := n.c.Status(cctx)
		ccancel()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n.home.Dir, err)
		}
		n.before = st.Counters
		if n.pid != 0 {
			n.cpu0, _ = procCPU(n.pid)
		}
	}
	host0, herr := hostBusySeconds()
	if errors.Is(herr, errProcUnavailable) {
		note("%v", herr)
	}
	self0, _ := procCPU(os.Getpid())
	res.CPUs = runtime.NumCPU()
	res.Load1Before, _ = loadAverage()
	r.start = time.Now()

	// Publish.
	r.publish(ctx, pub, readers)
	r.mu.Lock()
	sent := r.sent
	res.SendErrors, res.FirstSendError = r.sendErrs, r.firstErr
	lastSend := r.lastSend
	r.mu.Unlock()
	res.Sent = sent
	res.Expected = sent * len(readers)
	res.Load1After, _ = loadAverage()
	sendWindow := lastSend.Sub(r.start)
	if sendWindow <= 0 {
		sendWindow = o.duration
	}
	res.OfferedPerSecond = float64(sent) / max(sendWindow, o.duration).Seconds()

	// Drain: wait until every reader's mailbox holds every message, or
	// the drain period ends.
	r.mu.Lock()
	ids, sentAt := r.ids, r.sentAt
	r.mu.Unlock()
	var accepted []int
	for seq, id := range ids {
		if id != "" {
			accepted = append(accepted, seq)
		}
	}
	for _, n := range readers {
		n.pending = slices.Clone(accepted)
	}
	deadline := time.Now().Add(o.drain)
	for {
		left := 0
		for _, n := range readers {
			n.pending = n.mw.match(n.pending, ids, func(seq int, at time.Time) { n.found(at, sentAt[seq]) })
			left += len(n.pending)
		}
		if left == 0 || !time.Now().Before(deadline) {
			break
		}
		time.Sleep(benchDrainPoll)
	}
	// Files the events missed (the kernel's queue overflowed) or that the
	// watch did not see: read the inbox directories once.
	for _, n := range readers {
		_, _, overflow, _ := n.mw.status()
		if len(n.pending) == 0 && !overflow {
			continue
		}
		n.mw.rescan()
		scanned := time.Now()
		n.pending = n.mw.match(n.pending, ids, func(seq int, at time.Time) { n.found(at, sentAt[seq]) })
		if n.untimed > 0 && scanned.After(n.lastAt) {
			n.lastAt = scanned // an upper bound for the untimed ones
		}
	}
	for _, n := range readers {
		n.mw.close()
		_, full, overflow, err := n.mw.status()
		if overflow {
			note("%s: the kernel dropped file events (inotify queue overflow): %d deliveries found by reading the inbox after the drain are counted but not timed",
				n.home.Dir, n.untimed)
		}
		if full > 0 {
			note("%s: %d mailbox files not noted: the watch remembers %d at most", n.home.Dir, full, maxAppeared)
		}
		if err != nil {
			note("%s: mailbox watch: %v", n.home.Dir, err)
		}
	}

	// Counters, CPU and memory after the run.
	wall := time.Since(r.start)
	host1, herr := hostBusySeconds()
	self1, serr := procCPU(os.Getpid())
	var lat []time.Duration
	var lastDelivery time.Time
	uniqueCPU := map[int]cpuTime{}
	for _, n := range nodes {
		nr := benchNodeResult{Home: n.home.Dir, Name: n.name, Role: n.role, PID: n.pid, SharedPID: pidCount[n.pid] > 1}
		cctx, ccancel := context.WithTimeout(ctx, api.DefaultTimeout)
		st, err := n.c.Status(cctx)
		ccancel()
		if err == nil {
			nr.Drops = dropDiff(n.before, st.Counters)
			if n.role == "reader" {
				nr.RxDelivered = st.Counters["rx.delivered.message"] - min(n.before["rx.delivered.message"], st.Counters["rx.delivered.message"])
				nr.RxCommits = st.Counters["rx.commits"] - min(n.before["rx.commits"], st.Counters["rx.commits"])
			}
		} else {
			note("%s: status after the run: %v", n.home.Dir, err)
		}
		if n.pid != 0 {
			if cpu, err := procCPU(n.pid); err == nil {
				d := cpuTime{cpu.user - n.cpu0.user, cpu.sys - n.cpu0.sys}
				nr.CPUSeconds = d.user + d.sys
				uniqueCPU[n.pid] = d
			}
			if m, err := procMemory(n.pid); err == nil {
				nr.PeakRSSMiB, nr.RSSMiB, nr.AnonMiB, nr.FileMiB = m["VmHWM"], m["VmRSS"], m["RssAnon"], m["RssFile"]
			}
		}
		if n.role == "reader" {
			nr.Delivered = n.delivered
			nr.Missing = len(n.pending)
			nr.Untimed = n.untimed
			nr.NotHanded = int(n.notHanded.Load())
			nr.Duplicates, _, _, _ = n.mw.status()
			res.Delivered += n.delivered
			res.Duplicates += nr.Duplicates
			res.Missing += nr.Missing
			res.Untimed += n.untimed
			lat = append(lat, n.lat...)
			if n.lastAt.After(lastDelivery) {
				lastDelivery = n.lastAt
			}
		}
		res.Nodes = append(res.Nodes, nr)
	}
	for _, c := range uniqueCPU {
		res.CPUUserSeconds += c.user
		res.CPUSystemSeconds += c.sys
	}
	res.CPUSeconds = res.CPUUserSeconds + res.CPUSystemSeconds
	res.WallSeconds = wall.Seconds()
	if herr == nil && serr == nil {
		res.HostCPUSeconds = host1 - host0
		if pidCount[os.Getpid()] == 0 {
			res.BenchCPUSeconds = self1.user + self1.sys - self0.user - self0.sys
		}
		res.OtherCPUSeconds = max(0, res.HostCPUSeconds-res.CPUSeconds-res.BenchCPUSeconds)
	}
	if res.Delivered > 0 {
		res.CPUPerDeliveryUS = res.CPUSeconds / float64(res.Delivered) * 1e6
	}
	if res.Expected > 0 {
		res.DeliveredRatio = float64(res.Delivered) / float64(res.Expected)
	}
	if !lastDelivery.IsZero() {
		res.DeliveriesPerSecond = float64(res.Delivered) / lastDelivery.Sub(r.start).Seconds()
		res.DrainSeconds = max(0, lastDelivery.Sub(lastSend).Seconds())
	}
	res.Latency = summarize(lat)
	r.mu.Lock()
	res.SendLatency = summarize(r.sendLat)
	r.mu.Unlock()
	if o.rate > 0 && res.OfferedPerSecond < 0.95*float64(o.rate) {
		note("the publisher took %.1f of the %d messages/s asked, with %d sends in flight (send call p50 %.2f ms): it is the limit, or raise --concurrency",
			res.OfferedPerSecond, o.rate, o.concurrency, res.SendLatency.P50)
	}
	return res, nil
}

// publish sends for the run's duration, paced or as fast as the
// publisher takes them, with o.concurrency sends in flight at most.
func (r *benchRun) publish(ctx context.Context, pub *benchNode, readers []*benchNode) {
	jobs := make(chan int)
	var wg sync.WaitGroup
	pad := strings.Repeat("x", r.o.size)
	for range r.o.concurrency {
		wg.Go(func() {
			for seq := range jobs {
				r.sendOne(ctx, pub, readers, seq, pad)
			}
		})
	}
	// Offering stops at the end of the duration, also when the publisher
	// fell behind the pace: the offered rate then says what it took.
	end := r.start.Add(r.o.duration)
	stop := time.NewTimer(time.Until(end))
	defer stop.Stop()
	var interval time.Duration
	if r.o.rate > 0 {
		interval = time.Duration(float64(time.Second) / float64(r.o.rate))
	}
offer:
	for seq := 0; ; seq++ {
		if interval > 0 {
			at := r.start.Add(time.Duration(seq) * interval)
			if !at.Before(end) {
				break
			}
			if d := time.Until(at); d > 0 {
				time.Sleep(d)
			}
		}
		select {
		case jobs <- seq:
		case <-stop.C:
			break offer
		}
	}
	close(jobs)
	wg.Wait()
}

func (r *benchRun) sendOne(ctx context.Context, pub *benchNode, readers []*benchNode, seq int, pad string) {
	at := time.Now()
	head := r.prefix + strconv.Itoa(seq) + " " + strconv.FormatInt(at.UnixNano(), 10) + " "
	body := head + pad[:r.o.size-len(head)]
	cctx, cancel := context.WithTimeout(ctx, api.DefaultTimeout)
	s, err := pub.c.Send(cctx, api.Send{To: "#" + r.o.channel, Body: body})
	cancel()
	took := time.Since(at)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.sendErrs++
		if r.firstErr == "" {
			r.firstErr = err.Error()
		}
		return
	}
	r.sent++
	for len(r.ids) <= seq {
		r.ids = append(r.ids, "")
		r.sentAt = append(r.sentAt, time.Time{})
	}
	r.ids[seq], r.sentAt[seq] = s.ID, at
	r.sendLat = append(r.sendLat, took)
	if end := at.Add(took); end.After(r.lastSend) {
		r.lastSend = end
	}
	for _, n := range readers {
		if !slices.Contains(s.SentTo, n.fp) {
			n.notHanded.Add(1)
		}
	}
}

// found records the delivery of a message sent at sent whose file
// appeared at at (zero: found by a rescan, not timed).
func (n *benchNode) found(at, sent time.Time) {
	n.delivered++
	if at.IsZero() {
		n.untimed++
		return
	}
	n.lat = append(n.lat, at.Sub(sent))
	if at.After(n.lastAt) {
		n.lastAt = at
	}
}

// peersOf returns the fingerprints of c's linked peers.
func peersOf(ctx context.Context, c *api.Client) (map[string]bool, error) {
	cctx, cancel := context.WithTimeout(ctx, api.DefaultTimeout)
	defer cancel()
	p, err := c.Peers(cctx)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, x := range p.Peers {
		out[x.Fingerprint] = true
	}
	return out, nil
}

// dropDiff returns the counters that grew from before to after and name
// a drop, a failure or a refusal, or a link going down.
func dropDiff(before, after map[string]uint64) map[string]uint64 {
	out := map[string]uint64{}
	for k, v := range after {
		if v <= before[k] {
			continue
		}
		if strings.Contains(k, "drop") || strings.Contains(k, "fail") || strings.Contains(k, "refused") ||
			strings.Contains(k, "lagged") || k == "link.down" {
			out[k] = v - before[k]
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// lockPID reads the pid a running meshd wrote to its home's lock file.
func lockPID(h home.Home) (int, error) {
	b, err := os.ReadFile(h.LockPath())
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("lock file %s holds no pid", h.LockPath())
	}
	return pid, nil
}

// cpuTime is a process's user and system CPU time, in seconds.
type cpuTime struct{ user, sys float64 }

// errProcUnavailable: this system has no /proc to read CPU time, memory
// and load from (bench_proc_linux.go reads it), so bench reports those
// figures as unavailable.
var errProcUnavailable = fmt.Errorf("cpu, memory and load figures unavailable on %s", runtime.GOOS)

// summarize returns the count, percentiles and maximum of ds.
func summarize(ds []time.Duration) latencyStats {
	if len(ds) == 0 {
		return latencyStats{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	pct := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(s)))) - 1
		return ms(s[min(max(i, 0), len(s)-1)])
	}
	return latencyStats{Count: len(s), P50: pct(0.50), P90: pct(0.90), P99: pct(0.99), Max: ms(s[len(s)-1])}
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }

// writeBenchText prints a report for humans.
func writeBenchText(a *app, res *benchResult) error {
	w := a.Stdout
	rate := fmt.Sprintf("%d msg/s", res.Rate)
	if res.Rate == 0 {
		rate = "as fast as possible"
	}
	fmt.Fprintf(w, "bench #%s: 1 publisher, %d %s, %s for %s, %d-byte bodies, %d in flight\n",
		printable(res.Channel, false), res.Readers, plural(res.Readers, "reader", "readers"), rate,
		time.Duration(res.DurationSeconds*float64(time.Second)), res.Size, res.Concurrency)
	tw := table(w)
	fmt.Fprintf(tw, "offered\t%d messages, %.1f/s, %d send errors\n", res.Sent, res.OfferedPerSecond, res.SendErrors)
	if res.FirstSendError != "" {
		fmt.Fprintf(tw, "\tfirst send error: %s\n", printable(res.FirstSendError, false))
	}
	fmt.Fprintf(tw, "delivered\t%d of %d (%.2f%%), %d missing, %d duplicates; %.0f deliveries/s, last %.2fs after the last send\n",
		res.Delivered, res.Expected, 100*res.DeliveredRatio, res.Missing, res.Duplicates, res.DeliveriesPerSecond, res.DrainSeconds)
	mb := latencyText(res.Latency)
	if res.Untimed > 0 {
		mb += fmt.Sprintf("; %d not timed (found after the drain)", res.Untimed)
	}
	fmt.Fprintf(tw, "publish→mailbox file\t%s\n", mb)
	fmt.Fprintf(tw, "send call\t%s\n", latencyText(res.SendLatency))
	fmt.Fprintf(tw, "cpu\t%.2f s of meshd (user %.2f, system %.2f), %.0f µs per delivery\n",
		res.CPUSeconds, res.CPUUserSeconds, res.CPUSystemSeconds, res.CPUPerDeliveryUS)
	fmt.Fprintf(tw, "host\t%d CPUs busy %.1f of %.1f CPU-seconds: meshd %.1f, bench %.1f, other processes %.1f; load %.2f → %.2f\n",
		res.CPUs, res.HostCPUSeconds, float64(res.CPUs)*res.WallSeconds, res.CPUSeconds, res.BenchCPUSeconds, res.OtherCPUSeconds,
		res.Load1Before, res.Load1After)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = table(w)
	fmt.Fprintln(tw, "NODE\tROLE\tPID\tCPU S\tPEAK RSS\tNOW ANON+FILE\tDELIVERED\tMISSING\tDROPS")
	for _, n := range res.Nodes {
		name := n.Name
		if name == "" {
			name = filepath.Base(n.Home)
		}
		deliv, miss := "-", "-"
		if n.Role == "reader" {
			deliv, miss = strconv.Itoa(n.Delivered), strconv.Itoa(n.Missing)
			if n.Untimed > 0 {
				deliv += fmt.Sprintf(" (%d not timed)", n.Untimed)
			}
		}
		drops := "-"
		if len(n.Drops) > 0 {
			var parts []string
			for _, k := range slices.Sorted(maps.Keys(n.Drops)) {
				parts = append(parts, fmt.Sprintf("%s=%d", k, n.Drops[k]))
			}
			drops = strings.Join(parts, " ")
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.2f\t%.1f MiB\t%.0f+%.0f MiB\t%s\t%s\t%s\n",
			printable(name, false), n.Role, n.PID, n.CPUSeconds, n.PeakRSSMiB, n.AnonMiB, n.FileMiB, deliv, miss, drops)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range res.Notes {
		fmt.Fprintf(w, "note: %s\n", printable(s, false))
	}
	return nil
}

func latencyText(l latencyStats) string {
	if l.Count == 0 {
		return "no samples"
	}
	return fmt.Sprintf("p50 %.2f ms  p90 %.2f ms  p99 %.2f ms  max %.2f ms  (%d)", l.P50, l.P90, l.P99, l.Max, l.Count)
}
