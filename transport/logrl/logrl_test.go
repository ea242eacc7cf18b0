package logrl

import (
	"fmt"
	"testing"
	"time"
)

func TestAllowOncePerIntervalWithCount(t *testing.T) {
	l := New(time.Second, 0)
	t0 := time.Unix(1000, 0)
	if ok, n := l.Allow("a", t0); !ok || n != 0 {
		t.Fatalf("first line: %v %d", ok, n)
	}
	for i := range 99 {
		if ok, _ := l.Allow("a", t0.Add(time.Duration(i)*time.Millisecond)); ok {
			t.Fatalf("line %d within the interval allowed", i)
		}
	}
	if ok, _ := l.Allow("b", t0); !ok {
		t.Fatal("another key held back")
	}
	ok, n := l.Allow("a", t0.Add(time.Second))
	if !ok || n != 99 {
		t.Fatalf("after the interval: %v, suppressed %d, want 99", ok, n)
	}
}

func TestKeysBounded(t *testing.T) {
	l := New(time.Minute, 10)
	t0 := time.Unix(1000, 0)
	allowed := 0
	for i := range 10000 {
		if ok, _ := l.Allow(fmt.Sprint(i), t0); ok {
			allowed++
		}
	}
	// Ten keys, then one overflow key for the rest.
	if allowed != 11 || len(l.keys) != 11 {
		t.Fatalf("allowed %d lines, %d keys; want 11", allowed, len(l.keys))
	}
	// Once the interval passed, idle keys make room again.
	if ok, n := l.Allow("new", t0.Add(2*time.Minute)); !ok || n != 0 {
		t.Fatalf("new key after the interval: %v %d", ok, n)
	}
}

func TestBudgetAcrossKeys(t *testing.T) {
	l := New(time.Second, 100000)
	t0 := time.Unix(1000, 0)
	allowed := 0
	for i := range 10000 {
		if ok, _ := l.Allow(fmt.Sprint(i), t0.Add(time.Duration(i)*time.Microsecond)); ok {
			allowed++
		}
	}
	// DefaultBudget keys, then one overflow line.
	if allowed != DefaultBudget+1 {
		t.Fatalf("allowed %d lines in one interval, want %d", allowed, DefaultBudget+1)
	}
	// The next interval has a new budget, and the overflow line tells
	// what it held back.
	ok, n := l.Allow("x", t0.Add(2*time.Second))
	if !ok || n != 0 {
		t.Fatalf("new key in a new interval: %v %d", ok, n)
	}
	ok, n = l.Allow(overflowKey, t0.Add(2*time.Second))
	if !ok || n != 10000-DefaultBudget-1 {
		t.Fatalf("overflow: %v, suppressed %d", ok, n)
	}
}
