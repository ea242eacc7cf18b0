package main

import (
	"errors"
	"math"

	"github.com/prometheus/procfs"
)

// The figures bench takes from /proc, through prometheus/procfs, which
// parses its files as the kernel documents them (a command name with
// spaces or parentheses in /proc/<pid>/stat, the kB of /proc/<pid>/status).

// benchClockTicks is USER_HZ, the unit of utime and stime in
// /proc/<pid>/stat and of /proc/stat: 100 on every Linux architecture Go
// supports.
const benchClockTicks = 100

// procCPU returns the CPU time process pid has used, all its threads.
func procCPU(pid int) (cpuTime, error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return cpuTime{}, err
	}
	st, err := p.Stat()
	if err != nil {
		return cpuTime{}, err
	}
	return cpuTime{float64(st.UTime) / benchClockTicks, float64(st.STime) / benchClockTicks}, nil
}

// hostBusySeconds returns the CPU time all CPUs of the host have spent
// busy since boot: the first line of /proc/stat less idle and iowait.
func hostBusySeconds() (float64, error) {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return 0, err
	}
	st, err := fs.Stat()
	if err != nil {
		return 0, err
	}
	// procfs gives seconds; sum whole ticks, so that the figure is the
	// same to the last digit as the ticks' sum.
	t := st.CPUTotal
	var busy uint64
	for _, s := range []float64{t.User, t.Nice, t.System, t.IRQ, t.SoftIRQ, t.Steal} {
		busy += uint64(math.Round(s * benchClockTicks))
	}
	return float64(busy) / benchClockTicks, nil
}

// procMemory returns the memory figures of process pid in MiB, by their
// /proc/<pid>/status names: VmHWM (the peak resident set), VmRSS, and its
// parts RssAnon and RssFile.
func procMemory(pid int) (map[string]float64, error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return nil, err
	}
	st, err := p.NewStatus()
	if err != nil {
		return nil, err
	}
	if st.VmHWM == 0 {
		return nil, errors.New("no VmHWM in /proc/pid/status")
	}
	const mib = 1 << 20
	return map[string]float64{
		"VmHWM":   float64(st.VmHWM) / mib,
		"VmRSS":   float64(st.VmRSS) / mib,
		"RssAnon": float64(st.RssAnon) / mib,
		"RssFile": float64(st.RssFile) / mib,
	}, nil
}

// loadAverage returns the host's one-minute load average.
func loadAverage() (float64, error) {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return 0, err
	}
	la, err := fs.LoadAvg()
	if err != nil {
		return 0, err
	}
	return la.Load1, nil
}
