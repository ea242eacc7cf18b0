package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/meshd/meshd/internal/testpar"
	"github.com/meshd/meshd/node/api"
)

// docBlock returns the first block of lang in docs/AGENTS.md after the
// heading that starts with section.
func docBlock(t *testing.T, section, lang string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "AGENTS.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "\n"+section)
	if !ok {
		t.Fatalf("docs/AGENTS.md has no section %q", section)
	}
	m := regexp.MustCompile("(?s)```" + lang + "\n(.*?)```").FindStringSubmatch(rest)
	if m == nil {
		t.Fatalf("docs/AGENTS.md section %q has no %s block", section, lang)
	}
	return m[1]
}

// loopStub stands in for the model in the Python loop: it answers every
// message it is asked about with "ack: " and the message, the answer that
// made two loops trade ~970 messages in 15 s, and prints what it notes.
const loopStub = `
import sys
from types import SimpleNamespace
def llm_decide(item): return SimpleNamespace(status="rejected", result={"reason": "stub"})
def llm_reply(item): return "ack: " + item["body"]
def note_reply(item): print("reply:", item["body"], flush=True)
def note_result(item): pass
def note_subagent(item): pass
def note_failure(item): pass
`

// naiveLoop is the loop docs/AGENTS.md showed before it stopped answering
// replies: it answers every message, in reply to it.
const naiveLoop = `
import json, os, subprocess, time
def meshctl(*args):
    p = subprocess.run(["meshctl", *args], capture_output=True, text=True)
    return p.returncode, p.stdout
budget_ends = time.monotonic() + float(os.environ.get("LOOP_BUDGET_SECONDS", "3600"))
while (left := budget_ends - time.monotonic()) > 0:
    code, out = meshctl("inbox", "--wait", "--timeout", f"{max(1, min(300, int(left)))}s", "--json")
    if code != 0:
        continue
    for item in json.loads(out)["items"]:
        meshctl("read", item["id"])
        if item["kind"] == "message" and item.get("channel"):
            meshctl("send", "#" + item["channel"], "ack: " + item["body"], "--in-reply-to", item["id"])
`

// loopOrg is alice and bob sharing #ops, each subscribed; args go to
// both meshd.
func loopOrg(t *testing.T, args ...string) *histOrg {
	o := newHistOrgArgs(t, nil, args, "alice", "bob")
	o.ctl("alice", "channel", "create", "ops")
	waitFor(t, "bob learning #ops", 10*time.Second, func() bool {
		return meshctlRun(t, o.meshctl, "--home", o.homes["bob"], "channel", "show", "ops").code == 0
	})
	for _, n := range o.names {
		o.ctl(n, "subscribe", "ops")
	}
	return o
}

// startLoop runs a loop program (python3 or bash, with its script) as
// node name's agent, with meshctl on its PATH, until t ends; it returns
// its output and a channel closed when it exits.
func (o *histOrg) startLoop(t *testing.T, ctx context.Context, name, prog, script string, env ...string) (*syncBuffer, chan struct{}) {
	t.Helper()
	cmd := exec.CommandContext(ctx, prog, "-c", script)
	cmd.Env = append(cleanEnv("MESH_HOME="+o.homes[name], "PATH="+filepath.Dir(o.meshctl)+string(os.PathListSeparator)+os.Getenv("PATH")), env...)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = time.Second
	ownGroup(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		killGroup(cmd)
		<-done
		if t.Failed() {
			t.Logf("%s's loop (%s):\n%s", name, prog, out.String())
		}
	})
	return out, done
}

// waitingAgent waits until name's meshd counts a client waiting on the
// inbox: its loop is in its wait.
func (o *histOrg) waitingAgent(name string) {
	o.t.Helper()
	waitFor(o.t, name+"'s loop waiting", 15*time.Second, func() bool {
		var p api.Presence
		if err := json.Unmarshal([]byte(o.ctl(name, "presence", "--json")), &p); err != nil {
			o.t.Fatal(err)
		}
		return p.Agent != nil && p.Agent.Waiting > 0
	})
}

// opsMessages returns the bodies of #ops in name's store.
func (o *histOrg) opsMessages(name string) []string {
	o.t.Helper()
	var h api.History
	meshctlJSON(o.t, o.meshctl, &h, "--home", o.homes[name], "history", "#ops", "--limit", "500")
	var out []string
	for _, m := range h.Messages {
		out = append(out, m.Body)
	}
	return out
}

func needTools(t *testing.T, tools ...string) {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("the loops are for a POSIX system")
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
}

// TestAgentLoopsEnd runs docs/AGENTS.md's loops, as written, on two nodes
// sharing #ops, and sends one message: each exchange ends.
//
// The LLM loop (a), with a stand-in model that answers every message it
// is given with "ack: ...", runs on alice and bob with a budget of 8 s:
// alice's message gets one answer, from bob, and alice's loop reads that
// answer without answering it; both loops end on time (a second or two
// after their budget on an idle machine; the test allows lateSlack, far
// from the 5 minutes of a wait that ignored the budget), and #ops holds
// the two messages.
//
// The shell loop (b) runs on both: bob prints alice's message and answers
// nothing; it marks the message read.
func TestAgentLoopsEnd(t *testing.T) {
	// Not parallel: the loops must end within lateSlack of their budget,
	// and python loops beside other tests on a loaded machine did not.
	// With two CPU hogs beside it on 2 cores, alice's loop still ran 4 s
	// after its budget (each meshctl and python start takes seconds then).
	const lateSlack = 10 * time.Second
	needTools(t, "python3", "bash", "jq")
	o := loopOrg(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	t.Run("llm loop", func(t *testing.T) {
		const budget = 8 * time.Second
		script := loopStub + docBlock(t, "## (a)", "python")
		start := time.Now()
		outs, dones := map[string]*syncBuffer{}, map[string]chan struct{}{}
		for _, n := range o.names {
			outs[n], dones[n] = o.startLoop(t, ctx, n, "python3", script, "LOOP_BUDGET_SECONDS=8")
		}
		for _, n := range o.names {
			o.waitingAgent(n)
		}
		o.ctl("alice", "send", "#ops", "deploy finished?")
		waitFor(t, "alice's loop reading bob's answer", 10*time.Second, func() bool {
			return strings.Contains(outs["alice"].String(), "reply: ack: deploy finished?")
		})
		for _, n := range o.names {
			select {
			case <-dones[n]:
			case <-time.After(time.Until(start.Add(budget + lateSlack))):
				t.Fatalf("%s's loop still ran %v after it started, past its budget of %v", n, time.Since(start).Round(time.Second), budget)
			}
		}
		for _, n := range o.names {
			if got := o.opsMessages(n); len(got) != 2 || got[0] != "deploy finished?" || got[1] != "ack: deploy finished?" {
				t.Fatalf("#ops at %s holds %q, want the message and one answer", n, got)
			}
		}
	})

	t.Run("shell loop", func(t *testing.T) {
		script := docBlock(t, "## (b)", "bash")
		script = strings.ReplaceAll(script, "export MESH_HOME=/tmp/mesh/bob\n", "")
		outs := map[string]*syncBuffer{}
		for _, n := range o.names {
			outs[n], _ = o.startLoop(t, ctx, n, "bash", script)
		}
		for _, n := range o.names {
			o.waitingAgent(n)
		}
		o.ctl("alice", "send", "#ops", "tests are green")
		waitFor(t, "bob's loop printing alice's message", 10*time.Second, func() bool {
			return strings.Contains(outs["bob"].String(), "alice #ops: tests are green")
		})
		// bob's loop marked it read, and is back in its wait.
		waitFor(t, "bob's loop done with it", 10*time.Second, func() bool {
			var in api.Inbox
			meshctlJSON(t, o.meshctl, &in, "--home", o.homes["bob"], "inbox")
			return len(in.Items) == 0
		})
		o.waitingAgent("bob")
		if got := o.opsMessages("bob"); len(got) != 3 || got[2] != "tests are green" {
			t.Fatalf("#ops at bob holds %q: the shell loop answered", got)
		}
	})

	t.Run("outer harness", func(t *testing.T) {
		script := docBlock(t, "### Hosts that end their turn", "bash")
		script = strings.ReplaceAll(script, "export MESH_HOME=/home/agent/.meshd\n", "")
		outs, runs := map[string]*syncBuffer{}, map[string]string{}
		for _, n := range o.names {
			bin := t.TempDir()
			writeExec(t, filepath.Join(bin, "claude"), []byte(claudeStub))
			runs[n] = filepath.Join(bin, "runs")
			outs[n], _ = o.startLoop(t, ctx, n, "bash", "PATH="+bin+":$PATH\n"+script, "RUNS="+runs[n])
		}
		runCount := func(n string) int {
			b, _ := os.ReadFile(runs[n])
			return strings.Count(string(b), "run")
		}
		for _, n := range o.names {
			o.waitingAgent(n)
		}
		o.ctl("alice", "send", "#ops", "release?")
		waitFor(t, "alice's run reading bob's answer", 10*time.Second, func() bool {
			return strings.Contains(outs["alice"].String(), "reply: ack: release?")
		})
		// Both harnesses marked what woke them read, and wait again: one
		// run each, no spin, and one answer.
		for _, n := range o.names {
			waitFor(t, n+"'s inbox read", 10*time.Second, func() bool {
				var in api.Inbox
				meshctlJSON(t, o.meshctl, &in, "--home", o.homes[n], "inbox")
				return len(in.Items) == 0
			})
			o.waitingAgent(n)
			if r := runCount(n); r != 1 {
				t.Fatalf("%s's harness ran the model %d times, want 1", n, r)
			}
		}
		if got := o.opsMessages("alice"); len(got) != 5 || got[3] != "release?" || got[4] != "ack: release?" {
			t.Fatalf("#ops at alice holds %q, want the message and one answer", got)
		}
	})
}

// claudeStub stands in for `claude -p` in the outer harness: it follows
// the harness's prompt as a model would, through meshctl rather than the
// MCP tools, answering "ack: ..." to each message that is not itself an
// answer; it marks nothing read (a run that forgot to), and counts its
// runs in $RUNS.
const claudeStub = `#!/usr/bin/env bash
echo run >>"$RUNS"
meshctl inbox --json | jq -c '.items[] | select(.kind == "message")' | while read -r item; do
  if [ -z "$(jq -r '.in_reply_to // ""' <<<"$item")" ]; then
    meshctl send "#$(jq -r .channel <<<"$item")" "ack: $(jq -r .body <<<"$item")" --in-reply-to "$(jq -r .id <<<"$item")" >/dev/null
  else
    echo "reply: $(jq -r .body <<<"$item")"
  fi
done
`

// TestReplyStormCapped runs the loop docs/AGENTS.md showed before (it
// answers every message, answers included) on alice and bob: one message
// set them trading answers, and meshd's reply depth cap ends the exchange
// after reply_depth_max (16) answers, refusing the 17th
// (tx.refused.reply_depth), instead of it running until the budget ends.
func TestReplyStormCapped(t *testing.T) {
	testpar.Parallel(t)
	needTools(t, "python3")
	o := loopOrg(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dones := map[string]chan struct{}{}
	for _, n := range o.names {
		_, dones[n] = o.startLoop(t, ctx, n, "python3", naiveLoop, "LOOP_BUDGET_SECONDS=60")
	}
	for _, n := range o.names {
		o.waitingAgent(n)
	}
	sent := time.Now()
	o.ctl("alice", "send", "#ops", "ping")
	refused := func(n string) uint64 {
		var s struct {
			Counters map[string]uint64 `json:"counters"`
		}
		meshctlJSON(t, o.meshctl, &s, "--home", o.homes[n], "status")
		return s.Counters["tx.refused.reply_depth"]
	}
	waitFor(t, "a loop's reply refused at the depth cap", 30*time.Second, func() bool { return refused("alice")+refused("bob") > 0 })
	t.Logf("the reply storm ended %v after the first message", time.Since(sent).Round(10*time.Millisecond))
	// Both loops are back in their waits, with nothing left to answer.
	for _, n := range o.names {
		o.waitingAgent(n)
	}
	for _, n := range o.names {
		if got := o.opsMessages(n); len(got) != 17 {
			t.Fatalf("#ops at %s holds %d messages, want the first and 16 answers: %q", n, len(got), got)
		}
	}
	if r := refused("alice") + refused("bob"); r != 1 {
		t.Fatalf("%d replies refused, want 1", r)
	}
}

// naiveLoopNoReplyTo is naiveLoop answering without in_reply_to, so the
// reply depth cap does not see a chain.
var naiveLoopNoReplyTo = strings.Replace(naiveLoop, `, "--in-reply-to", item["id"])`, `)`, 1)

// TestReplyStormPaced: two loops that answer every message without
// in_reply_to escape the reply depth cap; the per-sender channel pace an
// operator set (channel_sender_burst 5, channel_sender_rate 6 a minute)
// holds them: each node takes five of the other's messages at once, then
// refuses the next (drop.quota), and the exchange ends there.
func TestReplyStormPaced(t *testing.T) {
	needTools(t, "python3")
	o := loopOrg(t, "--channel-sender-burst", "5", "--channel-sender-rate", "6")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if naiveLoopNoReplyTo == naiveLoop {
		t.Fatal("the loop still answers in reply")
	}
	for _, n := range o.names {
		o.startLoop(t, ctx, n, "python3", naiveLoopNoReplyTo, "LOOP_BUDGET_SECONDS=60")
	}
	for _, n := range o.names {
		o.waitingAgent(n)
	}
	sent := time.Now()
	o.ctl("alice", "send", "#ops", "ping")
	refused := func(n string) uint64 {
		var s struct {
			Counters map[string]uint64 `json:"counters"`
		}
		meshctlJSON(t, o.meshctl, &s, "--home", o.homes[n], "status")
		return s.Counters["drop.quota"]
	}
	waitFor(t, "a node refusing the other's message past its pace", 30*time.Second, func() bool { return refused("alice")+refused("bob") > 0 })
	t.Logf("the paced storm ended %v after the first message", time.Since(sent).Round(10*time.Millisecond))
	for _, n := range o.names {
		o.waitingAgent(n)
	}
	got := map[string]int{}
	for _, n := range o.names {
		got[n] = len(o.opsMessages(n))
	}
	// Each took at most the burst of the other's messages (plus what the
	// rate refilled meanwhile), and its own.
	if got["alice"] > 13 || got["bob"] > 13 || got["alice"] < 10 || got["bob"] < 10 {
		t.Fatalf("#ops holds %v messages, want 10 to 13 at each", got)
	}
}
