package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/home"
	"github.com/meshd/meshd/node/mailbox"
	"github.com/meshd/meshd/proto"
)

const usageBench = `usage: meshctl bench --readers HOME[,HOME...] --channel NAME [--publisher HOME]
                    [--rate N] [--duration D] [--size BYTES] [--drain D]
                    [--concurrency N] [--mailbox-sample N] [--json]

Drive a running mesh through the control sockets of its nodes and measure
it. The publisher (default: --home) sends messages to channel NAME for
duration D, at N messages per second (0: as fast as it takes them). Each
reader's event stream (GET /v1/events) is opened before the first message,
so every delivery is seen as it reaches the reader's inbox.

Each body is BYTES long and starts with "bench RUN SEQ SENT_UNIX_NANO", so
a delivery's latency is the reader's delivery time (the store commit that
made it durable) minus the time the publisher was asked to send. Every
reader is on this host, so all share one clock.

Reports: messages offered (sent) and the rate, deliveries (expected: every
message at every reader) and those missing after the drain period,
publish→inbox latency (p50, p90, p99, max), publish→mailbox-file latency
for a sample of messages (the file is stat'ed every millisecond, so add up
to about 1 ms), CPU seconds of every meshd (utime+stime from /proc, found
through the pid in each home's meshd.lock) per delivery, peak RSS (VmHWM)
per node, and the drop counters of each node that changed during the run
(status counters whose name says drop, fail or refused, and link.down).

Readers not subscribed to the channel are subscribed first (a muted
subscription counts: muted items reach the inbox too). The channel must
exist and the publisher must be one of its writers. When a reader's event
stream falls behind (meshd skips events for a slow reader), bench finds
the skipped deliveries in the reader's store instead, marking those
bench items read.

flags:
  --publisher HOME      the home of the node that sends (default: --home)
  --readers HOME,...    the homes of the nodes that read, comma-separated
  --channel NAME        the channel (with or without '#')
  --rate N              messages per second; 0 sends as fast as possible (default 100)
  --duration D          how long to send (default 10s)
  --size BYTES          message body size (default 1024)
  --drain D             how long to wait for deliveries after the last send (default 5s)
  --concurrency N       sends in flight at most (default rate/20, from 8 to 64; 64 with --rate 0)
  --mailbox-sample N    messages whose mailbox files are timed at each reader (default 100; 0: none)

examples:
  meshctl bench --publisher /srv/a --readers /srv/b,/srv/c --channel bench --rate 100 --duration 10s
  meshctl bench --publisher /srv/a --readers /srv/b,/srv/c --channel bench --rate 0 --json
`

// Bench limits.
const (
	benchMinSize        = 64 // room for the header "bench RUN SEQ NANOS "
	benchMaxDuration    = time.Hour
	benchMaxConcurrency = 256
	// benchMailboxPoll is how often a sampled message's mailbox file is
	// looked for, and benchMailboxWait how long.
	benchMailboxPoll = time.Millisecond
	benchMailboxWait = 10 * time.Second
	// benchHistoryCheck is how many of a reader's newest stored messages
	// are read to confirm deliveries its event stream skipped (lagged).
	benchHistoryCheck = api.MaxHistoryLimit
	// benchClockTicks is USER_HZ, the unit of utime and stime in
	// /proc/<pid>/stat: 100 on every Linux architecture Go supports.
	benchClockTicks = 100
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
	// Readers only.
	Delivered   int `json:"delivered"`
	FromHistory int `json:"confirmed_from_history,omitempty"` // not seen on the event stream (it lagged), found in the store
	Missing     int `json:"missing"`
	NotHanded   int `json:"not_handed,omitempty"` // sends whose sent_to lacked this reader (publisher queue full or no link)
	Duplicates  int `json:"duplicates,omitempty"`
	Lagged      int `json:"lagged_events,omitempty"`
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
	// Latency is publish→inbox: the reader's delivery time (its durable
	// commit) minus the send time carried in the body.
	Latency latencyStats `json:"latency"`
	// MailboxLatency is publish→mailbox file, for the sampled messages:
	// when the file was first seen (polled every millisecond) minus the
	// send time.
	MailboxLatency latencyStats `json:"mailbox_latency"`
	// MailboxMissing counts sampled deliveries whose file did not show
	// within 10 s.
	MailboxMissing int `json:"mailbox_missing"`
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
	publisher     string
	readers       []string
	channel       string
	rate          int
	duration      time.Duration
	size          int
	drain         time.Duration
	concurrency   int
	mailboxSample int
}

func runBench(a *app, args []string) error {
	fs := a.flagSet()
	publisher := fs.String("publisher", "", "")
	readers := fs.String("readers", "", "")
	chName := fs.String("channel", "", "")
	rate := fs.Int("rate", 100, "")
	duration := fs.Duration("duration", 10*time.Second, "")
	size := fs.Int("size", 1024, "")
	drain := fs.Duration("drain", 5*time.Second, "")
	concurrency := fs.Int("concurrency", 0, "")
	sample := fs.Int("mailbox-sample", 100, "")
	pos, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	if err := a.nargs(pos, 0, 0); err != nil {
		return err
	}
	o := benchOptions{rate: *rate, duration: *duration, size: *size, drain: *drain, concurrency: *concurrency, mailboxSample: *sample}
	if *publisher != "" {
		o.publisher = home.Open(*publisher).Dir
	} else {
		o.publisher = a.home().Dir
	}
	for _, r := range splitList(*readers) {
		o.readers = append(o.readers, home.Open(r).Dir)
	}
	switch {
	case len(o.readers) == 0:
		return a.usageErrorf("missing --readers HOME[,HOME...]")
	case *chName == "":
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
	case o.mailboxSample < 0:
		return a.usageErrorf("--mailbox-sample must not be negative")
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
	if o.channel, err = a.channelArg(*chName); err != nil {
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

// defaultBenchConcurrency is the number of sends in flight for a rate: a
// paced run needs about rate × send latency, and a send waits for the
// publisher's store commit (milliseconds, tens under load), so 50 ms' worth
// of messages, at least 8 and at most 64; 64 when sending as fast as
// possible, so the publisher's commits batch well.
func defaultBenchConcurrency(rate int) int {
	if rate == 0 {
		return 64
	}
	return min(max(rate/20, 8), 64)
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

	// Readers: the event stream and what it brought. Written by the
	// reader's goroutine until it ends, read by runBenchLoad after.
	events     *api.EventStream
	mw         *mailboxWatch // nil: the sampled files are polled for
	seen       []bool        // by seq: delivered
	lat        []time.Duration
	lastAt     time.Time
	count      atomic.Int64 // distinct deliveries so far
	dups       int
	lagged     atomic.Int64
	fromHist   int
	notHanded  atomic.Int64
	streamErr  error
	streamDone chan struct{}
}

// benchRun is the state shared by a run's goroutines.
type benchRun struct {
	o      benchOptions
	runID  string
	prefix string // "bench RUN "
	start  time.Time
	step   int // every step-th seq is sampled for the mailbox

	mu       sync.Mutex
	sent     int             // guarded by mu: sends meshd accepted
	ids      []string        // guarded by mu: envelope id by seq, "" for a failed send
	sendLat  []time.Duration // guarded by mu
	sendErrs int             // guarded by mu
	firstErr string          // guarded by mu
	lastSend time.Time       // guarded by mu: when the last accepted send returned

	mbMu      sync.Mutex
	mbLat     []time.Duration // guarded by mbMu
	mbMissing int             // guarded by mbMu
	mbWG      sync.WaitGroup

	// closing is set before bench closes the event streams, so that the
	// errors their readers see then are not reported.
	closing atomic.Bool
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

	// The mailbox sample is spread over a paced run: every step-th
	// message. Sending as fast as possible, the count is not known ahead.
	r.step = 1
	if o.mailboxSample > 0 {
		if o.rate > 0 {
			r.step = max(1, int(float64(o.rate)*o.duration.Seconds())/o.mailboxSample)
		} else {
			r.step = 50
		}
	}

	// Open every reader's event stream before the first send, and watch
	// its mailbox for the sampled files (polling for them where inotify
	// cannot watch).
	for _, n := range readers {
		if o.mailboxSample > 0 {
			if mw, err := watchMailbox(n.home.MailboxDir()); err == nil {
				n.mw = mw
				defer mw.close()
			} else {
				note("%s: cannot watch the mailbox (%v); polling for the sampled files", n.home.Dir, err)
			}
		}
		s, err := n.c.OpenEvents(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s: events: %w", n.home.Dir, err)
		}
		n.events = s
		n.streamDone = make(chan struct{})
		defer s.Close()
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
	host0, _ := hostBusySeconds()
	self0, _ := procCPU(os.Getpid())
	res.CPUs = runtime.NumCPU()
	res.Load1Before, _ = loadAverage()
	r.start = time.Now()
	for _, n := range readers {
		go r.readEvents(ctx, n)
	}

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

	// Drain: wait until every reader has every message, or the drain
	// period ends; a reader whose stream lagged is checked in its store.
	deadline := time.Now().Add(o.drain)
	var lastTotal int64 = -1
	lastProgress := time.Now()
	for time.Now().Before(deadline) {
		var total int64
		lagged := false
		for _, n := range readers {
			total += n.count.Load()
			lagged = lagged || n.lagged.Load() > 0
		}
		if total >= int64(res.Expected) {
			break
		}
		if total != lastTotal {
			lastTotal, lastProgress = total, time.Now()
		} else if lagged && time.Since(lastProgress) > time.Second {
			break // the stream skipped items: the store decides below
		}
		time.Sleep(10 * time.Millisecond)
	}
	r.closing.Store(true)
	for _, n := range readers {
		n.events.Close()
		<-n.streamDone
	}
	// The mailbox mirror may lag the inbox: its pollers each wait up to
	// benchMailboxWait for their file, and so do the watches.
	r.mbWG.Wait()
	mbDeadline := time.Now().Add(benchMailboxWait)
	for _, n := range readers {
		for n.mw != nil && n.mw.pending() > 0 && time.Now().Before(mbDeadline) {
			time.Sleep(10 * time.Millisecond)
		}
	}
	for _, n := range readers {
		if n.mw != nil {
			lat, missing := n.mw.finish()
			r.mbMu.Lock()
			r.mbLat = append(r.mbLat, lat...)
			r.mbMissing += missing
			r.mbMu.Unlock()
		}
	}

	// Readers whose stream lagged: confirm the rest from their stores.
	for _, n := range readers {
		if n.lagged.Load() == 0 || int(n.count.Load()) >= sent {
			continue
		}
		if err := r.confirmSkipped(ctx, n); err != nil {
			note("%s: could not check the store for deliveries the event stream skipped: %v", n.home.Dir, err)
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
			got := int(n.count.Load())
			nr.Delivered = got
			nr.FromHistory = n.fromHist
			nr.Missing = max(0, sent-got)
			nr.NotHanded = int(n.notHanded.Load())
			nr.Duplicates = n.dups
			nr.Lagged = int(n.lagged.Load())
			res.Delivered += got
			res.Missing += nr.Missing
			res.Duplicates += n.dups
			lat = append(lat, n.lat...)
			if n.lastAt.After(lastDelivery) {
				lastDelivery = n.lastAt
			}
			if n.streamErr != nil {
				note("%s: event stream: %v", n.home.Dir, n.streamErr)
			}
			if nr.Missing > 0 && nr.Lagged > 0 {
				note("%s: its event stream skipped items (lagged %d×) and %d of them are not in its store any more, or never were; "+
					"its rx.delivered.message counter grew by %d while %d were sent (retention keeps a channel's newest messages only)",
					n.home.Dir, nr.Lagged, nr.Missing, nr.RxDelivered, sent)
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
	r.mbMu.Lock()
	res.MailboxLatency = summarize(r.mbLat)
	res.MailboxMissing = r.mbMissing
	r.mbMu.Unlock()
	if o.rate > 0 && res.OfferedPerSecond < 0.95*float64(o.rate) {
		note("the publisher took %.1f of the %d messages/s asked, with %d sends in flight (send call p50 %.2f ms): it is the limit, or raise --concurrency",
			res.OfferedPerSecond, o.rate, o.concurrency, res.SendLatency.P50)
	}
	if o.mailboxSample == 0 {
		note("mailbox latency not measured (--mailbox-sample 0)")
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
	}
	r.ids[seq] = s.ID
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

// parseBody reads seq and the send time from a bench body of this run.
func (r *benchRun) parseBody(body string) (seq int, at time.Time, ok bool) {
	rest, ok := strings.CutPrefix(body, r.prefix)
	if !ok {
		return 0, time.Time{}, false
	}
	f := strings.SplitN(rest, " ", 3)
	if len(f) < 3 {
		return 0, time.Time{}, false
	}
	seq, err := strconv.Atoi(f[0])
	if err != nil || seq < 0 || seq > 1<<30 {
		return 0, time.Time{}, false
	}
	ns, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return 0, time.Time{}, false
	}
	return seq, time.Unix(0, ns), true
}

// record notes a delivery of seq at n; it reports whether it was new.
// Only n's reader goroutine (or, after it ended, runBenchLoad) calls it.
func (n *benchNode) record(seq int, lat time.Duration, at time.Time) bool {
	for len(n.seen) <= seq {
		n.seen = append(n.seen, false)
	}
	if n.seen[seq] {
		n.dups++
		return false
	}
	n.seen[seq] = true
	n.lat = append(n.lat, lat)
	if at.After(n.lastAt) {
		n.lastAt = at
	}
	n.count.Add(1)
	return true
}

// readEvents reads n's event stream until it ends.
func (r *benchRun) readEvents(ctx context.Context, n *benchNode) {
	defer close(n.streamDone)
	mbox := n.home.MailboxDir()
	var it benchItem
	for {
		data, lagged, err := n.events.NextRaw()
		if err != nil {
			if !r.closing.Load() && ctx.Err() == nil {
				n.streamErr = err
			}
			return
		}
		if lagged {
			n.lagged.Add(1)
			continue
		}
		if err := decodeBenchItem(data, &it); err != nil {
			if !r.closing.Load() {
				n.streamErr = fmt.Errorf("event stream: decode item: %w", err)
			}
			return
		}
		if it.Channel != r.o.channel {
			continue
		}
		seq, at, ok := r.parseBody(it.Body)
		if !ok {
			continue
		}
		if n.record(seq, it.Delivered.Sub(at), it.Delivered) && r.o.mailboxSample > 0 &&
			seq%r.step == 0 && seq/r.step < r.o.mailboxSample {
			if n.mw != nil {
				n.mw.want(it.ID, at)
			} else {
				r.mbWG.Add(1)
				go r.pollMailbox(ctx, mbox, it.ID, it.Delivered, at)
			}
		}
	}
}

// benchItem is what bench reads of an inbox item.
type benchItem struct {
	ID        string    `json:"id"`
	Channel   string    `json:"channel"`
	Delivered time.Time `json:"delivered"`
	Body      string    `json:"body"` // with decodeBenchItem's fast path, only its head
}

// benchBodyHead is how much of a body decodeBenchItem keeps: more than
// the "bench RUN SEQ NANOS " a bench body starts with.
const benchBodyHead = 96

// bodyKey is how an item's body field starts in meshd's JSON.
var bodyKey = []byte(`,"body":"`)

// decodeBenchItem decodes the fields of an item's JSON that bench reads.
// Decoding every item in full (its 1 KiB body most of all) was most of the
// load generator's CPU at saturation, on the cores the nodes share. meshd
// encodes an Item's fields in order, body after id, channel and delivered:
// the fast path decodes what comes before the body and takes the body's
// head as it is, up to its first quote or escape. Anything else (a body
// without the key, a head that is not plain text) is decoded in full.
func decodeBenchItem(data []byte, it *benchItem) error {
	*it = benchItem{}
	if i := bytes.Index(data, bodyKey); i > 0 {
		head := data[i+len(bodyKey):]
		head = head[:min(len(head), benchBodyHead)]
		if j := bytes.IndexAny(head, `"\`); j >= 0 {
			head = head[:j]
		}
		pre := append(data[:i:i], '}')
		if json.Unmarshal(pre, it) == nil && utf8.Valid(head) {
			it.Body = string(head)
			return nil
		}
		*it = benchItem{}
	}
	return json.Unmarshal(data, it)
}

// pollMailbox waits for the mailbox file of envelope id, delivered at
// delivered, and records its latency from sent. The mirror names the file
// after its own delivery time, taken just after the commit's, so the
// seconds from delivered on are tried.
func (r *benchRun) pollMailbox(ctx context.Context, mbox, id string, delivered, sent time.Time) {
	defer r.mbWG.Done()
	var paths []string
	for d := range 3 {
		t := delivered.Add(time.Duration(d) * time.Second)
		paths = append(paths, filepath.Join(mailbox.InboxDir(mbox, t), mailbox.Name(t, id)))
	}
	paths = slices.Compact(paths)
	deadline := time.Now().Add(benchMailboxWait)
	tick := time.NewTicker(benchMailboxPoll)
	defer tick.Stop()
	for {
		for _, p := range paths {
			if _, err := os.Stat(p); err == nil {
				lat := time.Since(sent)
				r.mbMu.Lock()
				r.mbLat = append(r.mbLat, lat)
				r.mbMu.Unlock()
				return
			}
		}
		if time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			deadline = time.Time{}
		case <-tick.C:
		}
	}
	r.mbMu.Lock()
	r.mbMissing++
	r.mbMu.Unlock()
}

// confirmSkipped finds in n's store the deliveries its event stream
// skipped, and records them with the store's delivery time. The newest
// messages come from one history page; older ones are looked up one by
// one as inbox items, which marks those bench items read.
func (r *benchRun) confirmSkipped(ctx context.Context, n *benchNode) error {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	h, err := n.c.History(cctx, api.HistoryQuery{Channel: r.o.channel, Since: r.start.Add(-time.Second).UTC().Format(time.RFC3339Nano), Limit: benchHistoryCheck})
	if err != nil {
		return err
	}
	for _, m := range h.Messages {
		seq, at, ok := r.parseBody(m.Body)
		if !ok || (seq < len(n.seen) && n.seen[seq]) {
			continue
		}
		n.record(seq, m.Received.Sub(at), m.Received)
		n.fromHist++
	}
	r.mu.Lock()
	ids := slices.Clone(r.ids)
	r.mu.Unlock()
	for seq, id := range ids {
		if id == "" || (seq < len(n.seen) && n.seen[seq]) {
			continue
		}
		it, err := n.c.MarkRead(cctx, id)
		var re *api.RemoteError
		if errors.As(err, &re) && re.Status == http.StatusNotFound {
			continue // not delivered
		}
		if err != nil {
			return err
		}
		if s, at, ok := r.parseBody(it.Body); ok && s == seq {
			n.record(seq, it.Delivered.Sub(at), it.Delivered)
			n.fromHist++
		}
	}
	return nil
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

// procCPU returns the CPU time process pid has used, all its threads.
func procCPU(pid int) (cpuTime, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return cpuTime{}, err
	}
	// The command name (field 2) is in parentheses and may hold spaces;
	// fields are counted after its closing one: state is field 3, utime
	// 14 and stime 15.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return cpuTime{}, errors.New("unexpected /proc/pid/stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return cpuTime{}, errors.New("unexpected /proc/pid/stat")
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return cpuTime{}, errors.New("unexpected /proc/pid/stat")
	}
	return cpuTime{float64(ut) / benchClockTicks, float64(st) / benchClockTicks}, nil
}

// hostBusySeconds returns the CPU time all CPUs of the host have spent
// busy since boot: the first line of /proc/stat less idle and iowait.
func hostBusySeconds() (float64, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	if len(f) < 9 || f[0] != "cpu" {
		return 0, errors.New("unexpected /proc/stat")
	}
	var busy uint64
	for i, x := range f[1:9] {
		v, err := strconv.ParseUint(x, 10, 64)
		if err != nil {
			return 0, errors.New("unexpected /proc/stat")
		}
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return float64(busy) / benchClockTicks, nil
}

// procMemory returns the memory figures of process pid in MiB, by their
// /proc/<pid>/status names: VmHWM (the peak resident set), VmRSS, and its
// parts RssAnon and RssFile.
func procMemory(pid int) (map[string]float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		name, val, ok := strings.Cut(line, ":")
		if !ok || (name != "VmHWM" && name != "VmRSS" && name != "RssAnon" && name != "RssFile") {
			continue
		}
		f := strings.Fields(val) // "12345 kB"
		if len(f) != 2 || f[1] != "kB" {
			continue
		}
		if kb, err := strconv.ParseUint(f[0], 10, 64); err == nil {
			out[name] = float64(kb) / 1024
		}
	}
	if _, ok := out["VmHWM"]; !ok {
		return nil, errors.New("no VmHWM in /proc/pid/status")
	}
	return out, nil
}

// loadAverage returns the host's 1-minute load average.
func loadAverage() (float64, error) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, errors.New("empty /proc/loadavg")
	}
	return strconv.ParseFloat(f[0], 64)
}

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
	fmt.Fprintf(tw, "publish→inbox\t%s\n", latencyText(res.Latency))
	mb := latencyText(res.MailboxLatency)
	if res.MailboxMissing > 0 {
		mb += fmt.Sprintf(", %d sampled files not seen within %v", res.MailboxMissing, benchMailboxWait)
	}
	fmt.Fprintf(tw, "publish→mailbox file\t%s (sampled, 1 ms polling)\n", mb)
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
			if n.FromHistory > 0 {
				deliv += fmt.Sprintf(" (%d from store)", n.FromHistory)
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
		if n.Lagged > 0 {
			drops += fmt.Sprintf(" (event stream lagged %d×)", n.Lagged)
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
