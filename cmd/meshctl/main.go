// Command meshctl is the command-line tool of meshd: it creates a node's
// identity, lets admins create, edit, sign and check the org roster, and
// talks to the local meshd over its control socket.
//
// Each command lives in a file of its own and implements
//
//	func(a *app, args []string) error
//
// where args are the words after the command name. The command builds its
// flag set with [app.flagSet] (which adds the global --home and --json),
// parses with [app.parse] (flags and arguments may be mixed), reads a.Stdin
// if it must, prints to a.Stdout, and returns an error; [run] prints it and
// picks the exit status. To add a command, write its file and add one line
// to the [commands] table.
//
// A command must build its whole flag set and call [app.parse] before it
// does anything else: shell completion runs it up to that call to learn
// its flags (see completion.go). Completion of its positional arguments
// follows the placeholders of its synopsis in the table (FILE, PEER,
// '#NAME', a|b|c).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
)

// command is one entry of the command table: a command, or a group of
// subcommands (roster) when sub is set. A group with run set also runs on
// its own when no subcommand follows (presence, presence set).
type command struct {
	name    string // the words that select it, as in "roster add"
	args    string // argument synopsis, for the command list
	summary string // one line, for the command list
	usage   string // full help text
	run     func(a *app, args []string) error
	sub     []*command
}

// commands is the command table. Keep it in the order of the help text.
var commands = []*command{
	{name: "init", args: "[--name NAME]", summary: "create this node's identity", usage: usageInit, run: runInit},
	{name: "id", summary: "show this node's identity", usage: usageID, run: runID},
	{name: "rekey", args: "[--cancel]", summary: "make this node's next key, for an admin's 'roster rekey'", usage: usageRekey, run: runRekey},
	{name: "join", args: "TOKEN|- [--name NAME] [--force]", summary: "join an org with an admin's invite token", usage: usageJoin, run: runJoin},
	{name: "adopt", args: "[FINGERPRINT]", summary: "let this fresh node adopt an org found by mDNS, confirmed by an admin's fingerprint", usage: usageAdopt, run: runAdopt},
	{name: "invite", args: "--role ROLE [--name NAME] [--expires D]", summary: "make a one-line token that lets a new node join (admins)", usage: usageInvite, run: runInvite, sub: []*command{
		{name: "invite list", summary: "list the invites this node made", usage: usageInviteList, run: runInviteList},
		{name: "invite revoke", args: "ID", summary: "make an unused invite unusable", usage: usageInviteRevoke, run: runInviteRevoke},
	}},
	{name: "roster", summary: "create, edit, sign and check the org roster", usage: usageRoster, sub: []*command{
		{name: "roster init", args: "--org ORG", summary: "create a roster with this node as its admin", usage: usageRosterInit, run: runRosterInit},
		{name: "roster show", args: "[FILE]", summary: "show a roster", usage: usageRosterShow, run: runRosterShow},
		{name: "roster pending", summary: "list refused non-members and roster updates awaiting signatures", usage: usageRosterPending, run: runRosterPending},
		{name: "roster add", args: "KEY|FINGERPRINT --role ROLE", summary: "add a member", usage: usageRosterAdd, run: runRosterAdd},
		{name: "roster remove", args: "MEMBER", summary: "remove a member", usage: usageRosterRemove, run: runRosterRemove},
		{name: "roster role", args: "MEMBER ROLE", summary: "change a member's role", usage: usageRosterRole, run: runRosterRole},
		{name: "roster rekey", args: "MEMBER NEWKEY [--grace D]", summary: "move a member to a new key, keeping its name and role", usage: usageRosterRekey, run: runRosterRekey},
		{name: "roster quorum", args: "N", summary: "set how many admins must sign an update", usage: usageRosterQuorum, run: runRosterQuorum},
		{name: "roster sign", args: "FILE", summary: "add this admin's signature to a roster update", usage: usageRosterSign, run: runRosterSign},
		{name: "roster verify", args: "FILE [--current FILE]", summary: "check a roster's signatures and authority", usage: usageRosterVerify, run: runRosterVerify},
		{name: "roster publish", args: "[FILE]", summary: "hand a signed roster to meshd, which spreads it", usage: usageRosterPublish, run: runRosterPublish},
	}},
	{name: "status", args: "[ID]", summary: "show the running meshd, or what became of a sent message", usage: usageStatus, run: runStatus},
	{name: "sent", args: "[--pending]", summary: "list sent messages: queued, delivered, expired or refused", usage: usageSent, run: runSent},
	{name: "peers", summary: "list linked peers", usage: usagePeers, run: runPeers},
	{name: "doctor", summary: "explain why this node has no or few peers, and name the fix", usage: usageDoctor, run: runDoctor},
	{name: "ui", summary: "print the address that opens the status page (owner only)", usage: usageUI, run: runUI},
	{name: "top", args: "[--once] [--interval D]", summary: "watch peers, traffic rates and drops, live", usage: usageTop, run: runTop},
	{name: "channel", summary: "create, change, delete, list and show channels", usage: usageChannel, sub: []*command{
		{name: "channel create", args: "NAME [--readers P] [--writers P]", summary: "create a channel (admins)", usage: usageChannelCreate, run: runChannelCreate},
		{name: "channel list", summary: "list channels, with subscription and access", usage: usageChannelList, run: runChannelList},
		{name: "channel show", args: "NAME", summary: "show a channel's policy, state and versions", usage: usageChannelShow, run: runChannelShow},
		{name: "channel set", args: "NAME [--readers P] [--writers P] [--history on|off]", summary: "sign the next version of a channel's policy (admins)", usage: usageChannelSet, run: runChannelSet},
		{name: "channel delete", args: "NAME", summary: "delete a channel everywhere (admins)", usage: usageChannelDelete, run: runChannelDelete},
		{name: "channel sign", args: "FILE", summary: "add this admin's signature to a channel edit (quorum)", usage: usageChannelSign, run: runChannelSign},
		{name: "channel publish", args: "FILE", summary: "apply and spread a co-signed channel edit", usage: usageChannelPublish, run: runChannelPublish},
	}},
	{name: "block", args: "MEMBER", summary: "keep a member's messages out of this inbox and mailbox", usage: usageBlock, run: runBlock},
	{name: "unblock", args: "MEMBER", summary: "let a blocked member's messages in again", usage: usageUnblock, run: runUnblock},
	{name: "blocks", summary: "list the members this node blocks", usage: usageBlocks, run: runBlocks},
	{name: "subscribe", args: "NAME", summary: "subscribe to a channel", usage: usageSubscribe, run: runSubscribe},
	{name: "unsubscribe", args: "NAME", summary: "stop taking a channel into the inbox", usage: usageUnsubscribe, run: runUnsubscribe},
	{name: "mute", args: "NAME", summary: "keep a channel at low priority, without waking", usage: usageMute, run: runMute},
	{name: "unmute", args: "NAME", summary: "subscribe to a muted channel again", usage: usageUnmute, run: runUnmute},
	{name: "send", args: "'#NAME' TEXT|-", summary: "send a message to a channel", usage: usageSend, run: runSend},
	{name: "dm", args: "PEER TEXT|-", summary: "send a direct message to a peer", usage: usageDM, run: runDM},
	{name: "fetch", args: "ID [NAME]", summary: "fetch a message's attachments and wait until they are present", usage: usageFetch, run: runFetch},
	{name: "request", args: "PEER INTENT [--params JSON]", summary: "ask a peer to do something", usage: usageRequest, run: runRequest},
	{name: "cancel", args: "REQUEST_ID [--to PEER]", summary: "ask the peer working on a request of yours to stop", usage: usageCancel, run: runCancel},
	{name: "card", summary: "publish or show an agent card: what a node serves", usage: usageCard, run: runCard, sub: []*command{
		{name: "card set", args: "--file FILE|-", summary: "publish this node's card", usage: usageCardSet, run: runCardSet},
		{name: "card show", args: "[PEER]", summary: "show a member's card, or this node's", usage: usageCardShow, run: runCardShow},
		{name: "card clear", summary: "publish an empty card", usage: usageCardClear, run: runCardClear},
	}},
	{name: "agents", args: "[--intent NAME]", summary: "list who serves which intents, with presence", usage: usageAgents, run: runAgents},
	{name: "respond", args: "REQUEST_ID STATUS [--result JSON]", summary: "answer a request", usage: usageRespond, run: runRespond},
	{name: "inbox", args: "[--all] [--wait] [--limit N] [--claim N]", summary: "list inbox items, or wait for one", usage: usageInbox, run: runInbox},
	{name: "read", args: "ID", summary: "mark an inbox item read and show it in full", usage: usageRead, run: runRead},
	{name: "claim", args: "ID [--lease D] [--release]", summary: "take an inbox item for this worker of a pool, for a lease", usage: usageClaim, run: runClaim},
	{name: "reply", args: "ID TEXT|-", summary: "answer an inbox item in its channel, or to its sender", usage: usageReply, run: runReply},
	{name: "search", args: "TEXT", summary: "find held inbox items whose text holds TEXT", usage: usageSearch, run: runSearch},
	{name: "requests", args: "[--pending]", summary: "list the requests this node sent, with their latest status", usage: usageRequests, run: runRequests},
	{name: "tail", args: "[--all-history N]", summary: "print inbox items as they arrive", usage: usageTail, run: runTail},
	{name: "post", args: "--subagent ID --summary TEXT [--result JSON]", summary: "put a subagent's result in this node's own inbox (local only)", usage: usagePost, run: runPost},
	{name: "wait", args: "[--timeout D]", summary: "wait for an unread item that wakes", usage: usageWait, run: runWait},
	{name: "history", args: "'#NAME'|@PEER [--since D] [--limit N]", summary: "list a channel's stored messages, or a conversation with a peer", usage: usageHistory, run: runHistory},
	{name: "compact", summary: "reclaim the history store's free space (meshd stopped)", usage: usageCompact, run: runCompact},
	{name: "repair", args: "[--force] [--unread]", summary: "rebuild a damaged history store from the mailbox (meshd stopped)", usage: usageRepair, run: runRepair},
	{name: "verify", args: "FILE...", summary: "check mailbox files and their signatures, offline", usage: usageVerify, run: runVerify},
	{name: "presence", summary: "show who is online", usage: usagePresence, run: runPresence, sub: []*command{
		{name: "presence set", args: "online|away|offline|auto [--for D]", summary: "override this node's presence for a while", usage: usagePresenceSet, run: runPresenceSet},
		{name: "presence note", args: "TEXT|--clear [--for D]", summary: "announce a short status note with this node's presence", usage: usagePresenceNote, run: runPresenceNote},
	}},
	{name: "mcp", args: "[--claude-channel] [--log-level L]", summary: "serve the meshd tools (wait_inbox and the rest) to an MCP host on stdio", usage: usageMCP, run: runMCP},
	{name: "demo", args: "[--keep] [--dir DIR]", summary: "run a throwaway three-node mesh and show each step", usage: usageDemo, run: runDemo},
	{name: "bench", args: "--readers HOME,... --channel NAME [--rate N]", summary: "measure a running mesh: latency, delivery, CPU and memory", usage: usageBench, run: runBench},
	{name: "version", summary: "print meshctl's version", usage: usageVersion, run: runVersion},
	{name: "help", args: "[COMMAND]", summary: "show help for a command", usage: usageHelp, run: runHelp},
}

const usageMain = `usage: meshctl [--home DIR] [--json] COMMAND [ARGS]

meshctl manages a meshd node: its identity and the org roster, and (through
a running meshd) its messages.

commands:
`

const usageGlobal = `
global flags (accepted before or after the command name):
  --home DIR   the node's home directory (default $MESH_HOME, else ~/.meshd)
  --json       print JSON instead of text

Run 'meshctl help COMMAND' or 'meshctl COMMAND -h' for a command's help.
`

const usageHelp = `usage: meshctl help [COMMAND]

Show the list of commands, or the help of one command.

examples:
  meshctl help
  meshctl help roster add
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// app is the state one invocation shares across its command: where input
// comes from, where output goes, and the global flags.
type app struct {
	Stdin  io.Reader // read only by commands given "-" for a text or JSON argument
	Stdout io.Writer
	Stderr io.Writer

	homeFlag string     // --home
	json     bool       // --json
	commands []*command // the command table
	cmd      *command   // the command running

	// probe makes [app.parse] keep the flag set in probed and stop the
	// command with errFlagsProbed: completion learns a command's flags so.
	probe  bool
	probed *flag.FlagSet
}

// Exit statuses.
const (
	exitOK      = 0
	exitError   = 1
	exitUsage   = 2
	exitTimeout = 3 // inbox --wait: the timeout passed with nothing to show
)

// run runs meshctl with args (without the program name) and returns the
// exit status. A nil stdin reads as empty.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	a := &app{Stdin: stdin, Stdout: stdout, Stderr: stderr, commands: commands}
	if len(args) > 0 && args[0] == completeCommand {
		a.runComplete(args[1:])
		return exitOK
	}
	cmd, rest, err := a.dispatch(args)
	if err == nil {
		a.cmd = cmd
		err = cmd.run(a, rest)
	}
	return a.report(err)
}

// dispatch reads global flags and the command words, and returns the
// command and its arguments.
func (a *app) dispatch(args []string) (*command, []string, error) {
	table := a.commands
	var group *command
	for {
		if group != nil && group.run != nil && ownFlags(args) {
			// A group that runs on its own takes its own flags
			// (invite --role member) when no subcommand follows.
			return group, args, nil
		}
		fs := flag.NewFlagSet("meshctl", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fs.Usage = func() {}
		a.globalFlags(fs)
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				a.printUsage(a.Stdout, group)
				return nil, nil, errHelp
			}
			return nil, nil, usageErrorf(group, "%v", err)
		}
		args = fs.Args()
		if len(args) == 0 && group != nil && group.run != nil {
			return group, nil, nil
		}
		if len(args) == 0 {
			return nil, nil, usageErrorf(group, "missing command")
		}
		word := args[0]
		var found *command
		for _, c := range table {
			if c.name == word || strings.HasSuffix(c.name, " "+word) {
				found = c
				break
			}
		}
		if found == nil {
			if group != nil {
				return nil, nil, usageErrorf(group, "unknown command %q", group.name+" "+word)
			}
			return nil, nil, usageErrorf(nil, "unknown command %q", word)
		}
		args = args[1:]
		if found.sub == nil {
			return found, args, nil
		}
		group, table = found, found.sub
	}
}

// ownFlags reports whether args start with a flag of the group itself
// (invite --role member) rather than a global flag, before any word: such
// a group runs on its own with them.
func ownFlags(args []string) bool {
	for i := 0; i < len(args); i++ {
		w := args[i]
		if w == "--" || !strings.HasPrefix(w, "-") {
			return false
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(w, "-"), "=")
		switch name {
		case "home":
			if !hasValue {
				i++
			}
		case "json", "h", "help":
		default:
			return true
		}
	}
	return false
}

func (a *app) globalFlags(fs *flag.FlagSet) {
	fs.StringVar(&a.homeFlag, "home", a.homeFlag, "")
	fs.BoolVar(&a.json, "json", a.json, "")
}

// flagSet returns an empty flag set for the running command, with the
// global flags already defined.
func (a *app) flagSet() *flag.FlagSet {
	fs := flag.NewFlagSet(a.cmd.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	a.globalFlags(fs)
	return fs
}

// parse parses args with fs, allowing flags after positional arguments
// ("roster add KEY --role member"); "--" ends the flags. It returns the
// positional arguments. -h prints the command's help and returns errHelp.
func (a *app) parse(fs *flag.FlagSet, args []string) ([]string, error) {
	if a.probe {
		a.probed = fs
		return nil, errFlagsProbed
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprint(a.Stdout, a.cmd.usage)
				return nil, errHelp
			}
			return nil, a.usageErrorf("%v", err)
		}
		rest := fs.Args()
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// nargs checks the number of positional arguments.
func (a *app) nargs(pos []string, min, max int) error {
	switch {
	case len(pos) < min:
		return a.usageErrorf("missing argument")
	case len(pos) > max:
		return a.usageErrorf("unexpected argument %q", pos[max])
	}
	return nil
}

// errHelp reports that help was printed on request: exit 0.
var errHelp = errors.New("help requested")

// usageError is a command line that does not parse: exit 2 and show the
// command's help on stderr.
type usageError struct {
	cmd *command // nil: the main usage
	msg string
}

func (e *usageError) Error() string { return e.msg }

func usageErrorf(cmd *command, format string, args ...any) error {
	return &usageError{cmd: cmd, msg: fmt.Sprintf(format, args...)}
}

func (a *app) usageErrorf(format string, args ...any) error {
	return usageErrorf(a.cmd, format, args...)
}

// exitStatus ends a command that has printed its answer with a status
// other than 0, and no message.
type exitStatus int

func (e exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// hintError adds a "hint:" line to an error.
type hintError struct {
	err  error
	hint string
}

func (e *hintError) Error() string { return e.err.Error() }
func (e *hintError) Unwrap() error { return e.err }

func withHint(err error, format string, args ...any) error {
	return &hintError{err: err, hint: fmt.Sprintf(format, args...)}
}

// report prints err, if any, and returns the exit status.
func (a *app) report(err error) int {
	if err == nil || errors.Is(err, errHelp) {
		return exitOK
	}
	var es exitStatus
	if errors.As(err, &es) {
		return int(es)
	}
	fmt.Fprintf(a.Stderr, "meshctl: %v\n", err)
	var ue *usageError
	if errors.As(err, &ue) {
		fmt.Fprintln(a.Stderr)
		if ue.cmd != nil && ue.cmd.sub == nil {
			fmt.Fprint(a.Stderr, ue.cmd.usage)
		} else {
			a.printUsage(a.Stderr, ue.cmd)
		}
		return exitUsage
	}
	var he *hintError
	if errors.As(err, &he) {
		fmt.Fprintf(a.Stderr, "hint: %s\n", he.hint)
	}
	return exitError
}

// printUsage prints the main help, or a group's, with the command list
// taken from the table.
func (a *app) printUsage(w io.Writer, group *command) {
	table := a.commands
	if group != nil {
		fmt.Fprint(w, group.usage)
		table = group.sub
		if group.run != nil {
			table = append([]*command{{name: group.name, args: group.args, summary: group.summary}}, table...)
		}
	} else {
		fmt.Fprint(w, usageMain)
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	for _, c := range table {
		if c.sub != nil {
			if c.run != nil {
				fmt.Fprintf(tw, "  %s %s\t%s\n", c.name, c.args, c.summary)
			}
			for _, s := range c.sub {
				fmt.Fprintf(tw, "  %s %s\t%s\n", s.name, s.args, s.summary)
			}
			continue
		}
		fmt.Fprintf(tw, "  %s %s\t%s\n", c.name, c.args, c.summary)
	}
	tw.Flush()
	fmt.Fprint(w, usageGlobal)
}

// find returns the command named by words, such as ["roster", "add"].
func (a *app) find(words []string) *command {
	table := a.commands
	var found *command
	for i := range words {
		found = nil
		for _, c := range table {
			if c.name == strings.Join(words[:i+1], " ") {
				found = c
			}
		}
		if found == nil {
			return nil
		}
		table = found.sub
	}
	return found
}

func runHelp(a *app, args []string) error {
	pos, err := a.parse(a.flagSet(), args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		a.printUsage(a.Stdout, nil)
		return nil
	}
	c := a.find(pos)
	if c == nil {
		return a.usageErrorf("unknown command %q", strings.Join(pos, " "))
	}
	if c.sub != nil {
		a.printUsage(a.Stdout, c)
		return nil
	}
	fmt.Fprint(a.Stdout, c.usage)
	return nil
}
