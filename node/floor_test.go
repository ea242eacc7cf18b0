//go:build linux

package node

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// processCPU returns this process's user plus system CPU time.
func processCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkLightLoadFloor measures what a process pays on this machine to
// handle one event at light load, before any meshd code runs: wake from
// idle (a 10 ms timer, as at 100 events/s), hand the event to another
// goroutine, and make one write durable or create one file. It reports
// CPU per event (cpu-µs/op); wall time is mostly the sleep. Run with a
// fixed count. The files go under MESHD_BENCH_DIR when it is set (see
// docs/BENCHMARKS.md on why the directory matters), else in a temporary
// directory:
//
//	go test -run='^$' -bench=LightLoadFloor -benchtime=200x ./node
func BenchmarkLightLoadFloor(b *testing.B) {
	dir := b.TempDir()
	if base := os.Getenv("MESHD_BENCH_DIR"); base != "" {
		d, err := os.MkdirTemp(base, "floor-")
		if err != nil {
			b.Fatal(err)
		}
		defer os.RemoveAll(d)
		dir = d
	}
	f, err := os.Create(filepath.Join(dir, "log"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	body := make([]byte, 1500)
	steps := map[string]func(i int){
		"wake":      func(int) {},
		"wake+hop":  nil, // the hand-off alone
		"wake+sync": func(int) { f.Write(body[:64]); syscall.Fdatasync(int(f.Fd())) },
		"wake+file": func(i int) {
			tmp := filepath.Join(dir, ".tmp-"+strconv.Itoa(i))
			os.WriteFile(tmp, body, 0o644)
			os.Rename(tmp, filepath.Join(dir, strconv.Itoa(i)+".txt"))
		},
	}
	for _, name := range []string{"wake", "wake+hop", "wake+sync", "wake+file"} {
		b.Run(name, func(b *testing.B) {
			step := steps[name]
			work, done := make(chan int), make(chan struct{})
			go func() {
				for i := range work {
					if step != nil {
						step(i)
					}
					done <- struct{}{}
				}
			}()
			defer close(work)
			c0 := processCPU(b)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				time.Sleep(10 * time.Millisecond) // deliberate: the idle gap whose wake-up cost is measured
				if name == "wake" {
					continue
				}
				work <- i
				<-done
			}
			b.StopTimer()
			b.ReportMetric(float64((processCPU(b)-c0).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}
