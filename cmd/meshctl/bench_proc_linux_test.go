package main

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
)

// The /proc figures bench takes through procfs must match the kernel's
// text as documented in proc(5): each is read here by hand just before
// and just after, and must lie between the two.

// statField returns field n (from 1) of /proc/<pid>/stat, counting after
// the command name in parentheses.
func statField(t *testing.T, pid, n int) uint64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	v, err := strconv.ParseUint(f[n-3], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// hostBusyTicks sums the first line of /proc/stat, less idle and iowait.
func hostBusyTicks(t *testing.T) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		t.Fatal(err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	var busy uint64
	for i, x := range strings.Fields(line)[1:9] {
		v, err := strconv.ParseUint(x, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		if i != 3 && i != 4 {
			busy += v
		}
	}
	return busy
}

// statusKB returns a kB figure of /proc/<pid>/status.
func statusKB(t *testing.T, pid int, name string) uint64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, name+":"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb
		}
	}
	t.Fatalf("no %s in /proc/%d/status", name, pid)
	return 0
}

func between(t *testing.T, what string, lo, got, hi float64) {
	t.Helper()
	if got < lo || got > hi {
		t.Errorf("%s = %v, want within [%v, %v]", what, got, lo, hi)
	}
}

func TestProcFigures(t *testing.T) {
	t.Parallel()
	pid := os.Getpid()

	u0, s0 := statField(t, pid, 14), statField(t, pid, 15)
	cpu, err := procCPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	u1, s1 := statField(t, pid, 14), statField(t, pid, 15)
	between(t, "utime", float64(u0)/100, cpu.user, float64(u1)/100)
	between(t, "stime", float64(s0)/100, cpu.sys, float64(s1)/100)

	h0 := hostBusyTicks(t)
	busy, err := hostBusySeconds()
	if err != nil {
		t.Fatal(err)
	}
	h1 := hostBusyTicks(t)
	between(t, "host busy", float64(h0)/100, busy, float64(h1)/100)
	// Whole ticks, as the sum of /proc/stat's integers gives.
	// (busy is ticks/100 in floating point, so ticks come back to within
	// rounding, not exactly: 18568.42 × 100 is 1856841.9999999998.)
	if ticks := busy * 100; math.Abs(ticks-math.Round(ticks)) > 1e-6 {
		t.Errorf("host busy %v s is not whole ticks", busy)
	}

	hwm0 := statusKB(t, pid, "VmHWM")
	m, err := procMemory(pid)
	if err != nil {
		t.Fatal(err)
	}
	hwm1 := statusKB(t, pid, "VmHWM")
	between(t, "VmHWM", float64(hwm0)/1024, m["VmHWM"], float64(hwm1)/1024)
	for _, name := range []string{"VmRSS", "RssAnon", "RssFile"} {
		if m[name] <= 0 || m[name] > m["VmHWM"]*2 {
			t.Errorf("%s = %v MiB, VmHWM %v MiB", name, m[name], m["VmHWM"])
		}
	}
	if _, err := procMemory(1 << 30); err == nil {
		t.Error("procMemory of no process: no error")
	}
	if _, err := procCPU(1 << 30); err == nil {
		t.Error("procCPU of no process: no error")
	}

	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	if got, err := loadAverage(); err != nil || got != want {
		// The kernel updates it every 5 s: once more.
		b, _ = os.ReadFile("/proc/loadavg")
		want2, _ := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
		if err != nil || (got != want && got != want2) {
			t.Errorf("load average %v (%v), /proc/loadavg says %v", got, err, want)
		}
	}
}
