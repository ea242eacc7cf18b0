// Command meshctl is the command-line tool of meshd: it creates a node's
// identity, lets admins create, edit, sign and check the org roster, and
// talks to the local meshd over its control socket.
//
// Each command lives in a file of its own: a type holding its flag values,
// whose define method puts each flag on a flag set, and
//
//	func(a *app, fl *xFlags, pos []string) error
//
// which runs with the flags parsed into fl and the positional arguments
// in pos (flags and arguments may be mixed on the line). It reads a.Stdin
// if it must, prints to a.Stdout, and returns an error; [run] prints it
// and picks the exit status. A command without flags of its own takes
// *noFlags. To add a command, write its file and add one line to the
// [commands] table, with its run wrapped by [runs]; to add a flag, add a
// field and its line in define.
//
// The table entry is the command's one description: dispatch, help and
// shell completion (completion.go) all read it. Completion takes the
// flags from the same define method that the command parses with, and
// completes positional arguments from the entry's args, whose placeholders
// also make the synopsis that help prints.
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
	name     string // the words that select it, as in "roster add"
	args     []arg  // its positional arguments, in order
	flagArgs string // the flags its synopsis shows, after args: "--role ROLE"
	summary  string // one line, for the command list
	usage    string // full help text
	run      *runner
	sub      []*command
}

// synopsis is c's line in the command list, after its name.
func (c *command) synopsis() string {
	var words []string
	for _, p := range c.args {
		words = append(words, p.holder)
	}
	if c.flagArgs != "" {
		words = append(words, c.flagArgs)
	}
	return strings.Join(words, " ")
}

// flagger is a command's flag values: define puts each of its flags on
// fs, bound to a field. Completion calls define too, on a flag set it only
// reads, so define does nothing else.
type flagger interface {
	define(fs *flag.FlagSet)
}

// noFlags is the flag type of a command that takes only the global flags.
type noFlags struct{}

func (*noFlags) define(*flag.FlagSet) {}

// runner is a command's run, bound to its flag type by [runs].
type runner struct {
	flags func() flagger // new flag values, zero but for define's defaults
	run   func(a *app, fl flagger, pos []string) error
}

// runs binds a command's run to its flag type F.
func runs[F any, P interface {
	*F
	flagger
}](run func(a *app, fl P, pos []string) error) *runner {
	return &runner{
		flags: func() flagger { return P(new(F)) },
		run:   func(a *app, fl flagger, pos []string) error { return run(a, fl.(P), pos) },
	}
}

// exec parses args with c's flags and runs c.
func (c *command) exec(a *app, args []string) error {
	fl := c.run.flags()
	fs := a.flagSet()
	fl.define(fs)
	pos, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	return c.run.run(a, fl, pos)
}

// flagSet returns c's flags with the global ones, as c parses them; a
// group without a run of its own (nil for meshctl itself) takes the global
// flags only.
func (c *command) flagSet() *flag.FlagSet {
	name := "meshctl"
	if c != nil {
		name = c.name
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var discard app
	discard.globalFlags(fs)
	if c != nil && c.run != nil {
		c.run.flags().define(fs)
	}
	return fs
}

// commands is the command table. Keep it in the order of the help text.
var commands = []*command{
	{name: "init", flagArgs: "[--name NAME]", summary: "create this node's identity", usage: usageInit, run: runs(runInit)},
	{name: "id", summary: "show this node's identity", usage: usageID, run: runs(runID)},
	{name: "rekey", flagArgs: "[--cancel]", summary: "make this node's next key, for an admin's 'roster rekey'", usage: usageRekey, run: runs(runRekey)},
	{name: "join", args: pos("TOKEN|-"), flagArgs: "[--name NAME] [--force]", summary: "join an org with an admin's invite token", usage: usageJoin, run: runs(runJoin)},
	{name: "adopt", args: pos("[FINGERPRINT]"), summary: "let this fresh node adopt an org found by mDNS, confirmed by an admin's fingerprint", usage: usageAdopt, run: runs(runAdopt)},
	{name: "invite", flagArgs: "--role ROLE [--name NAME] [--expires D]", summary: "make a one-line token that lets a new node join (admins)", usage: usageInvite, run: runs(runInvite), sub: []*command{
		{name: "invite list", summary: "list the invites this node made", usage: usageInviteList, run: runs(runInviteList)},
		{name: "invite revoke", args: pos("ID"), summary: "make an unused invite unusable", usage: usageInviteRevoke, run: runs(runInviteRevoke)},
	}},
	{name: "roster", summary: "create, edit, sign and check the org roster", usage: usageRoster, sub: []*command{
		{name: "roster init", flagArgs: "--org ORG", summary: "create a roster with this node as its admin", usage: usageRosterInit, run: runs(runRosterInit)},
		{name: "roster show", args: pos("[FILE]"), summary: "show a roster", usage: usageRosterShow, run: runs(runRosterShow)},
		{name: "roster pending", summary: "list refused non-members and roster updates awaiting signatures", usage: usageRosterPending, run: runs(runRosterPending)},
		{name: "roster add", args: pos("KEY|FINGERPRINT"), flagArgs: "--role ROLE", summary: "add a member", usage: usageRosterAdd, run: runs(runRosterAdd)},
		{name: "roster remove", args: pos("MEMBER"), summary: "remove a member", usage: usageRosterRemove, run: runs(runRosterRemove)},
		{name: "roster role", args: pos("MEMBER", "ROLE"), summary: "change a member's role", usage: usageRosterRole, run: runs(runRosterRole)},
		{name: "roster rekey", args: pos("MEMBER", "NEWKEY"), flagArgs: "[--grace D]", summary: "move a member to a new key, keeping its name and role", usage: usageRosterRekey, run: runs(runRosterRekey)},
		{name: "roster quorum", args: pos("N"), summary: "set how many admins must sign an update", usage: usageRosterQuorum, run: runs(runRosterQuorum)},
		{name: "roster sign", args: pos("FILE"), summary: "add this admin's signature to a roster update", usage: usageRosterSign, run: runs(runRosterSign)},
		{name: "roster verify", args: pos("FILE"), flagArgs: "[--current FILE]", summary: "check a roster's signatures and authority", usage: usageRosterVerify, run: runs(runRosterVerify)},
		{name: "roster publish", args: pos("[FILE]"), summary: "hand a signed roster to meshd, which spreads it", usage: usageRosterPublish, run: runs(runRosterPublish)},
	}},
	{name: "status", args: pos("[ID]"), summary: "show the running meshd, or what became of a sent message", usage: usageStatus, run: runs(runStatus)},
	{name: "sent", flagArgs: "[--pending]", summary: "list sent messages: queued, delivered, expired or refused", usage: usageSent, run: runs(runSent)},
	{name: "peers", summary: "list linked peers", usage: usagePeers, run: runs(runPeers)},
	{name: "doctor", summary: "explain why this node has no or few peers, and name the fix", usage: usageDoctor, run: runs(runDoctor)},
	{name: "ui", summary: "print the address that opens the status page (owner only)", usage: usageUI, run: runs(runUI)},
	{name: "top", flagArgs: "[--once] [--interval D]", summary: "watch peers, traffic rates and drops, live", usage: usageTop, run: runs(runTop)},
	{name: "channel", summary: "create, change, delete, list and show channels", usage: usageChannel, sub: []*command{
		{name: "channel create", args: []arg{{holder: "NAME"}}, // a new channel's name: nothing to complete
			flagArgs: "[--readers P] [--writers P]", summary: "create a channel (admins)", usage: usageChannelCreate, run: runs(runChannelCreate)},
		{name: "channel list", summary: "list channels, with subscription and access", usage: usageChannelList, run: runs(runChannelList)},
		{name: "channel show", args: pos("NAME"), summary: "show a channel's policy, state and versions", usage: usageChannelShow, run: runs(runChannelShow)},
		{name: "channel set", args: pos("NAME"), flagArgs: "[--readers P] [--writers P] [--history on|off]", summary: "sign the next version of a channel's policy (admins)", usage: usageChannelSet, run: runs(runChannelSet)},
		{name: "channel delete", args: pos("NAME"), summary: "delete a channel everywhere (admins)", usage: usageChannelDelete, run: runs(runChannelDelete)},
		{name: "channel sign", args: pos("FILE"), summary: "add this admin's signature to a channel edit (quorum)", usage: usageChannelSign, run: runs(runChannelSign)},
		{name: "channel publish", args: pos("FILE"), summary: "apply and spread a co-signed channel edit", usage: usageChannelPublish, run: runs(runChannelPublish)},
	}},
	{name: "block", args: pos("MEMBER"), summary: "keep a member's messages out of this inbox and mailbox", usage: usageBlock, run: runs(runBlock)},
	{name: "unblock", args: pos("MEMBER"), summary: "let a blocked member's messages in again", usage: usageUnblock, run: runs(runUnblock)},
	{name: "blocks", summary: "list the members this node blocks", usage: usageBlocks, run: runs(runBlocks)},
	{name: "subscribe", args: pos("NAME"), summary: "subscribe to a channel", usage: usageSubscribe, run: runs(runSubscribe)},
	{name: "unsubscribe", args: pos("NAME"), summary: "stop taking a channel into the inbox", usage: usageUnsubscribe, run: runs(runUnsubscribe)},
	{name: "mute", args: pos("NAME"), summary: "keep a channel at low priority, without waking", usage: usageMute, run: runs(runMute)},
	{name: "unmute", args: pos("NAME"), summary: "subscribe to a muted channel again", usage: usageUnmute, run: runs(runUnmute)},
	{name: "send", args: pos("'#NAME'", "TEXT|-"), summary: "send a message to a channel", usage: usageSend, run: runs(runSend)},
	{name: "dm", args: pos("PEER", "TEXT|-"), summary: "send a direct message to a peer", usage: usageDM, run: runs(runDM)},
	{name: "fetch", args: pos("ID", "[NAME]"), summary: "fetch a message's attachments and wait until they are present", usage: usageFetch, run: runs(runFetch)},
	{name: "request", args: pos("PEER", "INTENT"), flagArgs: "[--params JSON]", summary: "ask a peer to do something", usage: usageRequest, run: runs(runRequest)},
	{name: "cancel", args: pos("REQUEST_ID"), flagArgs: "[--to PEER]", summary: "ask the peer working on a request of yours to stop", usage: usageCancel, run: runs(runCancel)},
	{name: "card", summary: "publish or show an agent card: what a node serves", usage: usageCard, run: runs(runCard), sub: []*command{
		{name: "card set", flagArgs: "--file FILE|-", summary: "publish this node's card", usage: usageCardSet, run: runs(runCardSet)},
		{name: "card show", args: pos("[PEER]"), summary: "show a member's card, or this node's", usage: usageCardShow, run: runs(runCardShow)},
		{name: "card clear", summary: "publish an empty card", usage: usageCardClear, run: runs(runCardClear)},
	}},
	{name: "agents", flagArgs: "[--intent NAME]", summary: "list who serves which intents, with presence", usage: usageAgents, run: runs(runAgents)},
	{name: "respond", args: pos("REQUEST_ID", "STATUS"), flagArgs: "[--result JSON]", summary: "answer a request", usage: usageRespond, run: runs(runRespond)},
	{name: "inbox", flagArgs: "[--all] [--wait] [--limit N] [--claim N]", summary: "list inbox items, or wait for one", usage: usageInbox, run: runs(runInbox)},
	{name: "read", args: pos("ID"), summary: "mark an inbox item read and show it in full", usage: usageRead, run: runs(runRead)},
	{name: "claim", args: pos("ID"), flagArgs: "[--lease D] [--release]", summary: "take an inbox item for this worker of a pool, for a lease", usage: usageClaim, run: runs(runClaim)},
	{name: "reply", args: pos("ID", "TEXT|-"), summary: "answer an inbox item in its channel, or to its sender", usage: usageReply, run: runs(runReply)},
	{name: "search", args: pos("TEXT"), summary: "find held inbox items whose text holds TEXT", usage: usageSearch, run: runs(runSearch)},
	{name: "requests", flagArgs: "[--pending]", summary: "list the requests this node sent, with their latest status", usage: usageRequests, run: runs(runRequests)},
	{name: "tail", flagArgs: "[--all-history N]", summary: "print inbox items as they arrive", usage: usageTail, run: runs(runTail)},
	{name: "post", flagArgs: "--subagent ID --summary TEXT [--result JSON]", summary: "put a subagent's result in this node's own inbox (local only)", usage: usagePost, run: runs(runPost)},
	{name: "wait", flagArgs: "[--timeout D]", summary: "wait for an unread item that wakes", usage: usageWait, run: runs(runWait)},
	{name: "history", args: []arg{{"'#NAME'|@PEER", (*app).completeHistoryTarget}}, flagArgs: "[--since D] [--limit N]", summary: "list a channel's stored messages, or a conversation with a peer", usage: usageHistory, run: runs(runHistory)},
	{name: "compact", summary: "reclaim the history store's free space (meshd stopped)", usage: usageCompact, run: runs(runCompact)},
	{name: "repair", flagArgs: "[--force] [--unread]", summary: "rebuild a damaged history store from the mailbox (meshd stopped)", usage: usageRepair, run: runs(runRepair)},
	{name: "verify", args: pos("FILE..."), summary: "check mailbox files and their signatures, offline", usage: usageVerify, run: runs(runVerify)},
	{name: "presence", summary: "show who is online", usage: usagePresence, run: runs(runPresence), sub: []*command{
		{name: "presence set", args: pos("online|away|offline|auto"), flagArgs: "[--for D]", summary: "override this node's presence for a while", usage: usagePresenceSet, run: runs(runPresenceSet)},
		{name: "presence note", args: pos("TEXT|--clear"), flagArgs: "[--for D]", summary: "announce a short status note with this node's presence", usage: usagePresenceNote, run: runs(runPresenceNote)},
	}},
	{name: "mcp", flagArgs: "[--claude-channel] [--log-level L]", summary: "serve the meshd tools (wait_inbox and the rest) to an MCP host on stdio", usage: usageMCP, run: runs(runMCP)},
	{name: "demo", flagArgs: "[--keep] [--dir DIR]", summary: "run a throwaway three-node mesh and show each step", usage: usageDemo, run: runs(runDemo)},
	{name: "bench", flagArgs: "--readers HOME,... --channel NAME [--rate N]", summary: "measure a running mesh: latency, delivery, CPU and memory", usage: usageBench, run: runs(runBench)},
	{name: "version", summary: "print meshctl's version", usage: usageVersion, run: runs(runVersion)},
	{name: "help", args: pos("[COMMAND]"), summary: "show help for a command", usage: usageHelp, run: runs(runHelp)},
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

	homeFlag string          // --home
	json     bool            // --json
	commands []*command      // the command table
	cmd      *command        // the command running
	given    map[string]bool // the flags given on the line, by name
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
		err = cmd.exec(a, rest)
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
// global flags already defined. Commands get theirs from [command.exec].
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
func (a *app) parse(fs *flag.FlagSet, args []string) (pos []string, err error) {
	defer func() {
		if err == nil {
			a.given = map[string]bool{}
			fs.Visit(func(f *flag.Flag) { a.given[f.Name] = true })
		}
	}()
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
			table = append([]*command{{name: group.name, args: group.args, flagArgs: group.flagArgs, summary: group.summary}}, table...)
		}
	} else {
		fmt.Fprint(w, usageMain)
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	for _, c := range table {
		if c.sub != nil {
			if c.run != nil {
				fmt.Fprintf(tw, "  %s %s\t%s\n", c.name, c.synopsis(), c.summary)
			}
			for _, s := range c.sub {
				fmt.Fprintf(tw, "  %s %s\t%s\n", s.name, s.synopsis(), s.summary)
			}
			continue
		}
		fmt.Fprintf(tw, "  %s %s\t%s\n", c.name, c.synopsis(), c.summary)
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

func runHelp(a *app, _ *noFlags, pos []string) error {
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
