//go:build !linux

package main

// Without /proc, bench measures latency and delivery only, and says that
// the CPU, memory and load figures are unavailable.

func procCPU(int) (cpuTime, error) { return cpuTime{}, errProcUnavailable }

func hostBusySeconds() (float64, error) { return 0, errProcUnavailable }

func procMemory(int) (map[string]float64, error) { return nil, errProcUnavailable }

func loadAverage() (float64, error) { return 0, errProcUnavailable }
