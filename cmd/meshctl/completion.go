package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/home"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

const usageCompletion = `usage: meshctl completion bash|zsh|fish

Print a completion script for bash, zsh or fish. The script hands the words
of the command line to 'meshctl __complete', which answers from this
meshctl's own command table and flag sets: command names, subcommands
(roster add), each command's flags, roles, statuses and file arguments.
Channel names, inbox item ids and request ids come from the running meshd
of the home given with --home on the line (else the default home), and
member names from its roster; when meshd does not answer, they complete
nothing.

Because the answers come from meshctl itself, the script never needs to be
generated again after an upgrade.

examples:
  source <(meshctl completion bash)                          # this bash only
  meshctl completion bash > /etc/bash_completion.d/meshctl    # every new bash
  meshctl completion zsh > "${fpath[1]}/_meshctl"             # every new zsh
  meshctl completion fish > ~/.config/fish/completions/meshctl.fish
`

// The completion command joins the command table just before help, so that
// the table literal stays the one list of the others.
func init() {
	c := &command{name: "completion", args: pos("bash|zsh|fish"), summary: "print a shell completion script", usage: usageCompletion, run: runs(runCompletion)}
	i := slices.IndexFunc(commands, func(c *command) bool { return c.name == "help" })
	if i < 0 {
		i = len(commands)
	}
	commands = slices.Insert(commands, i, c)
}

// completionScripts are the scripts 'meshctl completion' prints, by shell.
var completionScripts = map[string]string{
	"bash": bashCompletion,
	"zsh":  zshCompletion,
	"fish": fishCompletion,
}

func runCompletion(a *app, _ *noFlags, pos []string) error {
	err := a.nargs(pos, 1, 1)
	if err != nil {
		return err
	}
	script, ok := completionScripts[pos[0]]
	if !ok {
		return a.usageErrorf("unknown shell %q: want bash, zsh or fish", pos[0])
	}
	if a.json {
		return a.printJSON(struct {
			Shell  string `json:"shell"`
			Script string `json:"script"`
		}{pos[0], script})
	}
	_, err = io.WriteString(a.Stdout, script)
	return err
}

// The __complete protocol. A completion script runs
//
//	meshctl __complete WORD... CURRENT
//
// with the words of the command line after "meshctl", up to the one under
// the cursor (CURRENT, maybe empty). meshctl prints one candidate for
// CURRENT a line, each optionally followed by a tab and a description,
// then a last line ":N", where N is a sum of the compDirective bits:
// 1 asks the shell to complete file names, 2 directory names.
// Candidates are already filtered by CURRENT. Words are as the user typed
// them: quotes and backslashes are undone here, once for all shells.
//
// __complete is not in the command table, so help does not list it. It
// never fails: what it cannot answer completes nothing.
const completeCommand = "__complete"

// compDirective tells the script what to do besides offering candidates.
type compDirective int

const (
	compFiles compDirective = 1 << iota // complete file names, as the shell does
	compDirs                            // complete directory names, as the shell does
)

// candidate is one completion.
type candidate struct {
	value string
	desc  string // may be empty
}

// dynamicTimeout bounds each question to meshd, so that a hung meshd
// cannot hang the shell.
const dynamicTimeout = 2 * time.Second

// runComplete answers a __complete call.
func (a *app) runComplete(words []string) {
	cands, dir := a.complete(words)
	var b strings.Builder
	for _, c := range cands {
		v := strings.NewReplacer("\n", " ", "\t", " ").Replace(c.value)
		if c.desc != "" {
			fmt.Fprintf(&b, "%s\t%s\n", v, strings.NewReplacer("\n", " ", "\t", " ").Replace(c.desc))
		} else {
			fmt.Fprintf(&b, "%s\n", v)
		}
	}
	fmt.Fprintf(&b, ":%d\n", dir)
	io.WriteString(a.Stdout, b.String())
}

// complete returns the candidates for the last of words, which follow
// "meshctl" on a command line.
func (a *app) complete(words []string) ([]candidate, compDirective) {
	if len(words) == 0 {
		words = []string{""}
	}
	for i := range words {
		words[i] = unquoteWord(words[i])
	}
	cur := words[len(words)-1]
	before := words[:len(words)-1]

	var (
		table     = a.commands // subcommands still to choose from, or nil under a command
		cmd       *command     // the command chosen, once table is nil
		fs        = (*command)(nil).flagSet()
		pos       []string // positional arguments of cmd
		flagsDone bool
	)
	for i := 0; i < len(before); i++ {
		w := before[i]
		switch {
		case !flagsDone && w == "--":
			// At a command's level, "--" ends its flags; before it, only
			// the next word (the command) may not start with "-".
			if table == nil {
				flagsDone = true
			}
		case !flagsDone && strings.HasPrefix(w, "-") && w != "-":
			name, value, hasValue := strings.Cut(strings.TrimLeft(w, "-"), "=")
			f := fs.Lookup(name)
			if f == nil || isBoolFlag(f) || hasValue {
				if f != nil && hasValue {
					a.noteFlag(name, value)
				}
				continue
			}
			if i+1 == len(before) {
				return a.completeFlagValue(cmd, name, "", cur)
			}
			i++
			a.noteFlag(name, before[i])
		case table != nil:
			found := findWord(table, w)
			if found == nil {
				return nil, 0 // an unknown command: nothing to offer
			}
			if found.sub != nil {
				table = found.sub
				fs = found.flagSet()
				continue
			}
			cmd, table = found, nil
			fs = found.flagSet()
		default:
			pos = append(pos, w)
		}
	}

	if !flagsDone && strings.HasPrefix(cur, "-") {
		if name, value, ok := strings.Cut(strings.TrimLeft(cur, "-"), "="); ok {
			if f := fs.Lookup(name); f == nil || isBoolFlag(f) {
				return nil, 0
			}
			prefix := cur[:len(cur)-len(value)]
			return a.completeFlagValue(cmd, name, prefix, value)
		}
		return flagCandidates(fs, cur), 0
	}
	if table != nil {
		var out []candidate
		for _, c := range table {
			if w := lastWord(c.name); strings.HasPrefix(w, cur) {
				out = append(out, candidate{w, c.summary})
			}
		}
		return out, 0
	}
	return a.completeArg(cmd, pos, cur)
}

// findWord returns the command of table that word selects, as dispatch
// would.
func findWord(table []*command, word string) *command {
	for _, c := range table {
		if c.name == word || strings.HasSuffix(c.name, " "+word) {
			return c
		}
	}
	return nil
}

// lastWord is the word that selects c within its group.
func lastWord(name string) string { return name[strings.LastIndex(name, " ")+1:] }

// noteFlag keeps what completion needs of a flag on the line: --home says
// which node the dynamic values come from.
func (a *app) noteFlag(name, value string) {
	if name == "home" {
		a.homeFlag = value
	}
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// flagCandidates are the flags of fs that start with cur, spelled with two
// dashes as the help texts do.
func flagCandidates(fs *flag.FlagSet, cur string) []candidate {
	var out []candidate
	fs.VisitAll(func(f *flag.Flag) {
		if name := "--" + f.Name; strings.HasPrefix(name, cur) {
			out = append(out, candidate{value: name, desc: f.Usage})
		}
	})
	return out
}

// Completions of flag values, by flag name. Flags not listed take values
// that cannot be guessed (a key, an id, a text), and complete nothing.
var flagValues = map[string]compFunc{
	"home":      completeDirs,
	"dir":       completeDirs,
	"file":      completeFiles,
	"out":       completeFiles,
	"current":   completeFiles,
	"role":      fixedWords(roleNames),
	"log-level": fixedWords(func() []string { return []string{"debug", "info", "warn", "error"} }),
	"channel":   (*app).completeChannels,
	"kind":      fixedWords(func() []string { return []string{"message", "request", "response", "delivery_failed"} }),
}

// compFunc completes the word cur.
type compFunc func(a *app, cur string) ([]candidate, compDirective)

// arg is a positional argument of a command: the placeholder that names
// it in the synopsis, and how to complete it (nil: it takes values that
// cannot be guessed, such as a text).
type arg struct {
	holder   string // FILE, '#NAME', online|away; "[FILE]" optional, "FILE..." repeated
	complete compFunc
}

// pos returns the positional arguments named by holders, each completed
// as its placeholder says: see argValues. A placeholder listing its values
// (online|away|offline) completes them.
func pos(holders ...string) []arg {
	args := make([]arg, len(holders))
	for i, h := range holders {
		name := strings.TrimSuffix(strings.Trim(h, "[]"), "...")
		complete := argValues[name]
		if complete == nil && isEnum(name) {
			words := strings.Split(name, "|")
			complete = fixedWords(func() []string { return words })
		}
		args[i] = arg{holder: h, complete: complete}
	}
	return args
}

// argValues are the usual completions of positional arguments, by the
// placeholder that names them. A command whose placeholder misleads
// declares its own [arg] instead (channel create NAME, a new name).
var argValues = map[string]compFunc{
	"NAME":       (*app).completeChannels,
	"'#NAME'":    (*app).completeHashChannels,
	"PEER":       (*app).completeMembers,
	"MEMBER":     (*app).completeMembers,
	"FILE":       completeFiles,
	"DIR":        completeDirs,
	"ROLE":       fixedWords(roleNames),
	"STATUS":     fixedWords(statusNames),
	"ID":         (*app).completeItemIDs,
	"REQUEST_ID": (*app).completeRequestIDs,
}

// completeHistoryTarget completes history's argument: '#NAME' for a
// channel, or @PEER for a conversation.
func (a *app) completeHistoryTarget(cur string) ([]candidate, compDirective) {
	if rest, ok := strings.CutPrefix(cur, "@"); ok {
		out, dir := a.completeMembers(rest)
		for i := range out {
			out[i].value = "@" + out[i].value
		}
		return out, dir
	}
	return a.completeHashChannels(cur)
}

// completeFlagValue completes the value of flag name of cmd (nil for
// meshctl or a group). prefix ("--role=") goes before each candidate.
func (a *app) completeFlagValue(cmd *command, name, prefix, cur string) ([]candidate, compDirective) {
	complete, ok := flagValues[name]
	if !ok {
		return nil, 0
	}
	cands, dir := complete(a, cur)
	if prefix != "" {
		if dir&(compFiles|compDirs) != 0 {
			return nil, dir // the shell completes the file name after the '='
		}
		for i := range cands {
			cands[i].value = prefix + cands[i].value
		}
	}
	return cands, dir
}

// completeArg completes positional argument len(pos) of cmd, as its
// entry in the command table declares it.
func (a *app) completeArg(cmd *command, pos []string, cur string) ([]candidate, compDirective) {
	if cmd == nil {
		return nil, 0
	}
	if cmd.name == "help" {
		return a.completeCommandWords(pos, cur)
	}
	var p arg
	switch n := len(cmd.args); {
	case len(pos) < n:
		p = cmd.args[len(pos)]
	case n > 0 && strings.HasSuffix(cmd.args[n-1].holder, "..."):
		p = cmd.args[n-1]
	}
	if p.complete == nil {
		return nil, 0
	}
	return p.complete(a, cur)
}

// isEnum reports whether a placeholder lists its values: online|away|offline.
func isEnum(holder string) bool {
	words := strings.Split(holder, "|")
	if len(words) < 2 {
		return false
	}
	for _, w := range words {
		if w == "" || strings.Trim(w, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
			return false
		}
	}
	return true
}

// completeCommandWords completes help's arguments: the words of a command.
func (a *app) completeCommandWords(pos []string, cur string) ([]candidate, compDirective) {
	table := a.commands
	for _, w := range pos {
		c := findWord(table, w)
		if c == nil || c.sub == nil {
			return nil, 0
		}
		table = c.sub
	}
	var out []candidate
	for _, c := range table {
		if w := lastWord(c.name); strings.HasPrefix(w, cur) {
			out = append(out, candidate{w, c.summary})
		}
	}
	return out, 0
}

func completeFiles(*app, string) ([]candidate, compDirective) { return nil, compFiles }
func completeDirs(*app, string) ([]candidate, compDirective)  { return nil, compDirs }

// fixedWords completes one of the words that list returns.
func fixedWords(list func() []string) func(*app, string) ([]candidate, compDirective) {
	return func(_ *app, cur string) ([]candidate, compDirective) {
		var out []candidate
		for _, w := range list() {
			if strings.HasPrefix(w, cur) {
				out = append(out, candidate{value: w})
			}
		}
		return out, 0
	}
}

// roleNames are the roster's roles, lowest first, as --role takes them.
func roleNames() []string {
	var names []string
	for r := roster.RoleObserver; r.Valid(); r++ {
		names = append(names, r.String())
	}
	return names
}

// statusNames are the statuses 'meshctl respond' takes.
func statusNames() []string {
	var names []string
	for s := proto.Status(1); ; s++ {
		if _, err := proto.ParseStatus(s.String()); err != nil {
			return names
		}
		names = append(names, s.String())
	}
}

// remote runs one bounded call to the home's meshd; a meshd that does not
// answer gives nothing.
func remote[T any](a *app, get func(*api.Client, context.Context) (T, error)) (T, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), dynamicTimeout)
	defer cancel()
	v, err := get(a.client(), ctx)
	return v, err == nil
}

// completeChannels completes the channels meshd knows, by name.
func (a *app) completeChannels(cur string) ([]candidate, compDirective) {
	chs, ok := remote(a, (*api.Client).Channels)
	if !ok {
		return nil, 0
	}
	var out []candidate
	for _, ch := range chs.Channels {
		if strings.HasPrefix(ch.Name, strings.TrimPrefix(cur, "#")) {
			out = append(out, candidate{ch.Name, ch.Subscription})
		}
	}
	return out, 0
}

// completeHashChannels completes channels written '#NAME'.
func (a *app) completeHashChannels(cur string) ([]candidate, compDirective) {
	if cur != "" && !strings.HasPrefix(cur, "#") {
		return nil, 0
	}
	out, dir := a.completeChannels(cur)
	for i := range out {
		out[i].value = "#" + out[i].value
	}
	return out, dir
}

// completeMembers completes the names of the home's roster members, the
// roster that meshd keeps current. Members without a name are left out:
// their keys are not typed by hand.
func (a *app) completeMembers(cur string) ([]candidate, compDirective) {
	r, err := home.ReadRoster(a.home().RosterPath())
	if err != nil {
		return nil, 0
	}
	var out []candidate
	for _, m := range r.Members {
		if m.Name != "" && strings.HasPrefix(m.Name, cur) {
			out = append(out, candidate{m.Name, m.Role.String()})
		}
	}
	slices.SortFunc(out, func(x, y candidate) int { return strings.Compare(x.value, y.value) })
	return slices.CompactFunc(out, func(x, y candidate) bool { return x.value == y.value }), 0
}

// completeItemIDs completes the ids of unread inbox items, for 'read'.
func (a *app) completeItemIDs(cur string) ([]candidate, compDirective) {
	in, ok := remote(a, func(c *api.Client, ctx context.Context) (*api.Inbox, error) {
		return c.Inbox(ctx, api.InboxQuery{})
	})
	if !ok {
		return nil, 0
	}
	var out []candidate
	for _, it := range in.Items {
		if strings.HasPrefix(it.ID, cur) {
			out = append(out, candidate{it.ID, itemDesc(&it)})
		}
	}
	return out, 0
}

// completeRequestIDs completes the request ids of the requests in the
// inbox, read or not, for 'respond'.
func (a *app) completeRequestIDs(cur string) ([]candidate, compDirective) {
	in, ok := remote(a, func(c *api.Client, ctx context.Context) (*api.Inbox, error) {
		return c.Inbox(ctx, api.InboxQuery{All: true})
	})
	if !ok {
		return nil, 0
	}
	var out []candidate
	for _, it := range in.Items {
		if it.Kind == "request" && it.RequestID != "" && strings.HasPrefix(it.RequestID, cur) &&
			!slices.ContainsFunc(out, func(c candidate) bool { return c.value == it.RequestID }) {
			out = append(out, candidate{it.RequestID, itemDesc(&it)})
		}
	}
	return out, 0
}

// itemDesc describes an inbox item in a few words: "request deploy from
// alice".
func itemDesc(it *api.Item) string {
	what := it.Kind
	if it.Intent != "" {
		what += " " + it.Intent
	}
	if from := it.From.Name; from != "" {
		what += " from " + from
	}
	return printable(what, false)
}

// unquoteWord undoes the shell's quoting of a word as typed: quotes,
// backslashes, and a leading "~/".
func unquoteWord(w string) string {
	if !strings.ContainsAny(w, `'"\~`) {
		return w
	}
	var b strings.Builder
	var quote rune
	escaped := false
	for _, r := range w {
		switch {
		case escaped:
			b.WriteRune(r)
			escaped = false
		case quote == '\'':
			if r == '\'' {
				quote = 0
			} else {
				b.WriteRune(r)
			}
		case r == '\\':
			escaped = true
		case quote == '"':
			if r == '"' {
				quote = 0
			} else {
				b.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote = r
		default:
			b.WriteRune(r)
		}
	}
	s := b.String()
	if rest, ok := strings.CutPrefix(s, "~/"); ok && strings.HasPrefix(w, "~/") {
		if h, err := os.UserHomeDir(); err == nil {
			s = h + "/" + rest
		}
	}
	return s
}

// The scripts. Each passes the words to 'meshctl __complete' and turns the
// answer into the shell's own form; none knows anything of meshctl's
// commands, so a script never goes stale.

const bashCompletion = `# bash completion for meshctl, generated by 'meshctl completion bash'.
# Load it in this shell with: source <(meshctl completion bash)

_meshctl() {
	local cur=${COMP_WORDS[COMP_CWORD]} bin=${COMP_WORDS[0]}
	local i w glue= strip= out line directive
	local -a words=() lines=()
	COMPREPLY=()
	[[ $bin == "~/"* ]] && bin=$HOME/${bin#"~/"}
	# bash splits --flag=value at the '=': join the pieces again.
	for ((i = 1; i <= COMP_CWORD; i++)); do
		w=${COMP_WORDS[i]}
		if [[ $w == = && ${#words[@]} -gt 0 && ${words[-1]} == -* && ${words[-1]} != *=* ]]; then
			words[-1]+==
			glue=1
			((i == COMP_CWORD)) && strip=${words[-1]}
		elif [[ -n $glue ]]; then
			glue=
			((i == COMP_CWORD)) && strip=${words[-1]}
			words[-1]+=$w
		else
			words+=("$w")
		fi
	done
	[[ -n $strip ]] && cur=${cur#=}
	out=$("$bin" __complete "${words[@]}" 2>/dev/null </dev/null) || return 0
	mapfile -t lines <<<"$out"
	directive=${lines[-1]}
	[[ $directive == :* ]] || return 0
	directive=${directive#:}
	unset 'lines[-1]'
	if ((directive & 2)); then
		compopt -o filenames 2>/dev/null
		mapfile -t COMPREPLY < <(compgen -d -- "$cur")
	elif ((directive & 1)); then
		compopt -o filenames 2>/dev/null
		mapfile -t COMPREPLY < <(compgen -f -- "$cur")
	else
		for line in "${lines[@]}"; do
			[[ -n $line ]] || continue
			line=${line%%$'\t'*}
			line=${line#"$strip"}
			COMPREPLY+=("$(printf '%q' "$line")")
		done
	fi
	return 0
}

complete -F _meshctl meshctl
`

const zshCompletion = `#compdef meshctl
# zsh completion for meshctl, generated by 'meshctl completion zsh'.
# Install it as _meshctl in a directory of $fpath, or load it in this
# shell (after compinit) with: source <(meshctl completion zsh)

_meshctl() {
	local out line directive value
	local -a lines cands
	out=$(${~words[1]} __complete "${(@)words[2,CURRENT]}" 2>/dev/null </dev/null) || return 1
	lines=("${(@f)out}")
	directive=${lines[-1]}
	[[ $directive == :* ]] || return 1
	directive=${directive#:}
	lines[-1]=()
	if (( directive & 2 )); then
		_files -/
		return
	elif (( directive & 1 )); then
		_files
		return
	fi
	for line in "${lines[@]}"; do
		[[ -n $line ]] || continue
		value=${line%%$'\t'*}
		value=${value//:/\\:}
		if [[ $line == *$'\t'* ]]; then
			cands+=("$value:${line#*$'\t'}")
		else
			cands+=("$value")
		fi
	done
	(( $#cands )) || return 1
	_describe -t values meshctl cands
}

if [[ $zsh_eval_context[-1] == loadautofunc ]]; then
	_meshctl "$@"
else
	compdef _meshctl meshctl
fi
`

const fishCompletion = `# fish completion for meshctl, generated by 'meshctl completion fish'.
# Install it as ~/.config/fish/completions/meshctl.fish, or load it in this
# shell with: meshctl completion fish | source

function __meshctl_complete
	set -l words (commandline -opc)
	set -l cur (commandline -ct)
	set -l out ($words[1] __complete $words[2..-1] $cur 2>/dev/null </dev/null)
	or return
	set -l directive (string replace -r '^:' '' -- $out[-1])
	or return
	set -e out[-1]
	if test (math "bitand($directive, 2)") -ne 0
		__fish_complete_directories $cur
	else if test (math "bitand($directive, 1)") -ne 0
		__fish_complete_path $cur
	else
		string match -v -- '' $out
	end
end

complete -c meshctl -f -a '(__meshctl_complete)'
`
