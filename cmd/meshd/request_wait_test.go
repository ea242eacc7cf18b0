package main

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/meshd/meshd/internal/testpar"
	"github.com/meshd/meshd/internal/testwait"
)

// TestRequestWait: meshctl request --wait blocks until the final answer,
// prints it and exits 0 for completed; with --timeout and no answer it
// exits 3. Responding twice is refused, with a hint.
func TestRequestWait(t *testing.T) {
	testpar.Parallel(t)
	o := newHistOrg(t, "alice", "bob")
	alice, bob := o.homes["alice"], o.homes["bob"]

	cmd := exec.Command(o.meshctl, "--home", alice, "request", "bob", "run-tests", "--wait", "--timeout", "30s", "--json")
	cmd.Env = cleanEnv()
	var out syncBuffer
	cmd.Stdout = &out
	var errb syncBuffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })

	// bob sees the request and answers accepted, then completed.
	var rid string
	testwait.For(t, 15*time.Second, "bob to get the request", func() bool {
		var in struct {
			Items []struct {
				Kind      string
				RequestID string `json:"request_id"`
			} `json:"items"`
		}
		meshctlJSON(t, o.meshctl, &in, "--home", bob, "inbox", "--all")
		for _, it := range in.Items {
			if it.Kind == "request" {
				rid = it.RequestID
			}
		}
		return rid != ""
	})
	meshctlOK(t, o.meshctl, "--home", bob, "respond", rid, "accepted")
	meshctlOK(t, o.meshctl, "--home", bob, "respond", rid, "completed", "--result", `{"passed":42}`)
	r := meshctlRun(t, o.meshctl, "--home", bob, "respond", rid, "failed")
	if r.code != 1 || !strings.Contains(r.stderr, "already answered") || !strings.Contains(r.stderr, "hint:") {
		t.Fatalf("second final answer: %+v", r)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("request --wait: %v\n%s\n%s", err, out.String(), errb.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("request --wait did not return:\n%s", out.String())
	}
	var it struct {
		Kind, Status string
		RequestID    string `json:"request_id"`
		Result       map[string]int
	}
	if err := json.Unmarshal([]byte(out.String()), &it); err != nil || it.Status != "completed" || it.RequestID != rid || it.Result["passed"] != 42 {
		t.Fatalf("request --wait output: %v\n%s", err, out.String())
	}

	// Nobody answers: --timeout ends the wait with exit 3.
	start := time.Now()
	r = meshctlRun(t, o.meshctl, "--home", alice, "request", "bob", "slow-thing", "--wait", "--timeout", "1s")
	if r.code != 3 || !strings.Contains(r.stdout, "no answer within 1s") || time.Since(start) > 15*time.Second {
		t.Fatalf("request --wait --timeout 1s: %+v", r)
	}
	if r := meshctlRun(t, o.meshctl, "--home", alice, "request", "bob", "x", "--timeout", "1s"); r.code != 2 {
		t.Fatalf("--timeout without --wait: %+v", r)
	}
}

// TestErrorsSayItOnce: refusals naming an unknown channel or peer say so
// once, with the name, and names ignore case.
func TestErrorsSayItOnce(t *testing.T) {
	testpar.Parallel(t)
	o := newHistOrg(t, "alice", "bob")
	alice := o.homes["alice"]
	for _, args := range [][]string{
		{"subscribe", "nope"}, {"channel", "show", "nope"}, {"send", "#nope", "x"}, {"dm", "nobody", "x"},
	} {
		r := meshctlRun(t, o.meshctl, append([]string{"--home", alice}, args...)...)
		msg, _, _ := strings.Cut(r.stderr, "\n")
		if r.code != 1 || !strings.Contains(msg, "no") {
			t.Fatalf("%v: %+v", args, r)
		}
		for _, w := range []string{"unknown channel", "nope", "nobody", "member"} {
			if strings.Count(msg, w) > 1 {
				t.Errorf("%v: %q says %q more than once", args, msg, w)
			}
		}
	}
	// Bob by another case.
	meshctlOK(t, o.meshctl, "--home", alice, "dm", "BOB", "hello in capitals")
}
