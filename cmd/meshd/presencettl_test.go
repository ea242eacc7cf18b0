package main

import (
	"encoding/json"
	"syscall"
	"testing"
	"time"

	"github.com/meshd/meshd/internal/testpar"
	"github.com/meshd/meshd/node/api"
)

// TestPresenceTTLsDiffer: a runs with presence_ttl 30s (a refresh every
// 10 s), b with 2s. Each Presence envelope carries its sender's TTL, so b
// waits a's 30 s rather than its own 2 s, and through 12 s of watching,
// six of b's TTLs, each still sees the other online.
func TestPresenceTTLsDiffer(t *testing.T) {
	testpar.First(t)
	o := newHistOrg(t, "a", "b")
	for name, ttl := range map[string]string{"a": "30s", "b": "2s"} {
		if err := o.ds[name].stop(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		o.args[name] = append(o.args[name], "--presence-ttl", ttl)
		o.start(name)
	}
	waitPeers(t, o.meshctl, o.homes["a"], 1, 15*time.Second)
	waitPeers(t, o.meshctl, o.homes["b"], 1, 15*time.Second)
	stateOf := func(viewer, peer string) string {
		var p api.Presence
		if err := json.Unmarshal([]byte(o.ctl(viewer, "presence", "--json")), &p); err != nil {
			t.Fatal(err)
		}
		for _, e := range p.Entries {
			if e.Name == peer {
				return e.State
			}
		}
		return "unknown"
	}
	waitFor(t, "a and b seeing each other online", 15*time.Second, func() bool {
		return stateOf("a", "b") == "online" && stateOf("b", "a") == "online"
	})
	// Deliberate: both must stay online for 12 s, six of b's TTLs.
	for end := time.Now().Add(12 * time.Second); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		if s := stateOf("b", "a"); s != "online" {
			t.Fatalf("b (presence_ttl 2s) shows a (30s) %s", s)
		}
		if s := stateOf("a", "b"); s != "online" {
			t.Fatalf("a (presence_ttl 30s) shows b (2s) %s", s)
		}
	}
}
