package main

import (
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

const usageCompletion = `usage: meshctl completion bash|zsh

Print a completion script for bash or zsh. It completes command names,
subcommands (roster add), each command's flags, roles, statuses and file
arguments, and asks this meshctl for channel names ('meshctl channel list')
and member names ('meshctl roster show') of the home given with --home on
the line, else of the default home.

The script is generated from meshctl's own command table and help texts,
so it completes what this meshctl has; generate it again after an upgrade.

examples:
  source <(meshctl completion bash)                        # this bash only
  meshctl completion bash > /etc/bash_completion.d/meshctl  # every new bash
  meshctl completion zsh > "${fpath[1]}/_meshctl"           # every new zsh
`

// The completion command joins the command table just before help, so that
// the table literal stays the one list of the others.
func init() {
	c := &command{name: "completion", args: "bash|zsh", summary: "print a shell completion script", usage: usageCompletion, run: runCompletion}
	i := slices.IndexFunc(commands, func(c *command) bool { return c.name == "help" })
	if i < 0 {
		i = len(commands)
	}
	commands = slices.Insert(commands, i, c)
}

func runCompletion(a *app, args []string) error {
	pos, err := a.parse(a.flagSet(), args)
	if err != nil {
		return err
	}
	if err := a.nargs(pos, 1, 1); err != nil {
		return err
	}
	tree := compTree(a.commands)
	switch pos[0] {
	case "bash":
		return writeBashCompletion(a.Stdout, tree)
	case "zsh":
		return writeZshCompletion(a.Stdout, tree)
	}
	return a.usageErrorf("unknown shell %q: want bash or zsh", pos[0])
}

// compSpec is what the completion scripts know of one command: its
// subcommands, flags and positional arguments. All of it is read from the
// command table and the usage texts, so a new command or a new flag in a
// command's help completes without a change here.
type compSpec struct {
	path    string      // the words that select it, as in "roster add"; "" for meshctl itself
	summary string      // from the command table
	subs    []*compSpec // a group's subcommands
	flags   []compFlag  // the command's flags, then the global ones
	args    []string    // the completion kind of each positional argument
	more    string      // the kind of any further arguments (FILE...), or ""
}

// compFlag is one flag of a command.
type compFlag struct {
	name string // "--role"
	kind string // the completion kind of its value; "" for a flag that takes none
}

// Completion kinds, as the scripts name them. "words a b c" completes one
// of the words.
const (
	kindNone        = "none"     // a value that cannot be guessed (a key, an id, text)
	kindFile        = "file"     // a file name
	kindDir         = "dir"      // a directory name
	kindChannel     = "channel"  // a channel name, from 'meshctl channel list'
	kindHashChannel = "channel#" // a channel name written '#NAME'
	kindPeer        = "peer"     // a member's name, from 'meshctl roster show'
	kindCommand     = "command"  // a command name, a word at a time (help)
)

// argKinds maps the placeholders of positional arguments in usage lines to
// completion kinds. Placeholders not listed complete nothing.
var argKinds = map[string]string{
	"NAME":    kindChannel,
	"'#NAME'": kindHashChannel,
	"PEER":    kindPeer,
	"MEMBER":  kindPeer,
	"FILE":    kindFile,
	"DIR":     kindDir,
	"COMMAND": kindCommand,
	"ROLE":    wordsKind(roleNames()),
	"STATUS":  wordsKind(statusNames()),
}

// flagKinds is argKinds for flag values, which name different things: the
// NAME of --name is a new display name, not a channel.
var flagKinds = map[string]string{
	"FILE": kindFile,
	"DIR":  kindDir,
	"ROLE": wordsKind(roleNames()),
}

// argOverrides are positional arguments whose placeholder misleads, keyed
// by the command's name and the placeholder.
var argOverrides = map[string]string{
	"channel create NAME": kindNone, // a new channel's name
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

func wordsKind(words []string) string { return "words " + strings.Join(words, " ") }

var (
	// flagLine is one line of a help text's flag list: "  --dir DIR   put the ...".
	flagLine = regexp.MustCompile(`(?m)^  (--[a-z][a-z0-9-]*)(?: ([^ ]+))?(?:  |$)`)
	// shellWord is what the scripts take unquoted, in words lists.
	shellWord = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`)
	// enumPlaceholder is a placeholder listing its values: online|away|offline.
	enumPlaceholder = regexp.MustCompile(`^[a-z0-9-]+(\|[a-z0-9-]+)+$`)
)

// compTree returns the completion spec of meshctl with the commands of table.
func compTree(table []*command) *compSpec {
	root := &compSpec{flags: globalCompFlags()}
	for _, c := range table {
		root.subs = append(root.subs, compCommand(c))
	}
	return root
}

// globalCompFlags reads the global flags from their help text.
func globalCompFlags() []compFlag {
	var flags []compFlag
	for _, m := range flagLine.FindAllStringSubmatch(usageGlobal, -1) {
		flags = addCompFlag(flags, m[1], m[2])
	}
	return flags
}

func compCommand(c *command) *compSpec {
	s := &compSpec{path: c.name, summary: c.summary}
	synopsis := c.args
	if line, _, _ := strings.Cut(c.usage, "\n"); strings.HasPrefix(line, "usage: meshctl "+c.name) {
		synopsis = strings.TrimPrefix(line, "usage: meshctl "+c.name)
	}
	toks := strings.Fields(synopsis)
	for i := 0; i < len(toks); i++ {
		tok := strings.Trim(toks[i], "[]")
		if strings.HasPrefix(tok, "-") {
			// A flag's value follows it inside the same brackets:
			// "--role ROLE", "[--since D]", but not "[--wait [--timeout D]]".
			value := ""
			if !strings.HasSuffix(toks[i], "]") && i+1 < len(toks) && !strings.HasPrefix(toks[i+1], "[") && !strings.HasPrefix(toks[i+1], "-") {
				i++
				value = strings.TrimRight(toks[i], "]")
			}
			s.flags = addCompFlag(s.flags, tok, value)
			continue
		}
		if c.sub != nil || tok == "" {
			continue // a group's synopsis is "COMMAND [ARGS]"
		}
		placeholder, more := strings.CutSuffix(tok, "...")
		kind := argKind(c.name, placeholder)
		if more || kind == kindCommand {
			s.more = kind
		}
		if !more {
			s.args = append(s.args, kind)
		}
	}
	for _, m := range flagLine.FindAllStringSubmatch(c.usage, -1) {
		s.flags = addCompFlag(s.flags, m[1], m[2])
	}
	for _, g := range globalCompFlags() {
		s.flags = mergeCompFlag(s.flags, g)
	}
	for _, sub := range c.sub {
		s.subs = append(s.subs, compCommand(sub))
	}
	return s
}

// addCompFlag adds flag name, whose value is named by placeholder ("" for
// none), or completes what flags already knows of it.
func addCompFlag(flags []compFlag, name, placeholder string) []compFlag {
	name, _, _ = strings.Cut(name, "=")
	if !strings.HasPrefix(name, "--") {
		name = "-" + name
	}
	if !shellWord.MatchString(strings.TrimLeft(name, "-")) {
		return flags
	}
	return mergeCompFlag(flags, compFlag{name: name, kind: flagKind(placeholder)})
}

// mergeCompFlag adds f to flags, or completes what flags already knows of
// it: a flag seen once with a value takes one, and a kind that completes
// something beats none.
func mergeCompFlag(flags []compFlag, f compFlag) []compFlag {
	i := slices.IndexFunc(flags, func(g compFlag) bool { return g.name == f.name })
	switch {
	case i < 0:
		return append(flags, f)
	case flags[i].kind == "" || flags[i].kind == kindNone && f.kind != "":
		flags[i].kind = f.kind
	}
	return flags
}

func flagKind(placeholder string) string {
	switch {
	case placeholder == "":
		return ""
	case enumPlaceholder.MatchString(placeholder):
		return wordsKind(strings.Split(placeholder, "|"))
	case flagKinds[placeholder] != "":
		return flagKinds[placeholder]
	}
	return kindNone
}

func argKind(cmd, placeholder string) string {
	if k, ok := argOverrides[cmd+" "+placeholder]; ok {
		return k
	}
	if enumPlaceholder.MatchString(placeholder) {
		return wordsKind(strings.Split(placeholder, "|"))
	}
	if k := argKinds[placeholder]; k != "" {
		return k
	}
	return kindNone
}

// walk calls f for s and every command under it.
func (s *compSpec) walk(f func(*compSpec)) {
	f(s)
	for _, sub := range s.subs {
		sub.walk(f)
	}
}

// lastWord is the word that selects s within its group.
func (s *compSpec) lastWord() string {
	return s.path[strings.LastIndex(s.path, " ")+1:]
}

// shq quotes s for sh.
func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// writeCompletionData writes the shell functions that hold the command
// table, in the syntax bash and zsh share:
//
//	_meshctl_subs PATH            the subcommands of PATH ("" for the commands)
//	_meshctl_flags PATH           the flags of PATH
//	_meshctl_flagarg PATH FLAG    the kind of FLAG's value; fails if it takes none
//	_meshctl_arg PATH N           the kind of positional argument N (from 0),
//	                              or of any further one if N is '*'
func writeCompletionData(w io.Writer, tree *compSpec) {
	fmt.Fprint(w, "_meshctl_subs() {\n\tcase $1 in\n")
	tree.walk(func(s *compSpec) {
		if len(s.subs) == 0 {
			return
		}
		var words []string
		for _, sub := range s.subs {
			words = append(words, sub.lastWord())
		}
		fmt.Fprintf(w, "\t%s) echo %s ;;\n", shq(s.path), shq(strings.Join(words, " ")))
	})
	fmt.Fprint(w, "\tesac\n}\n\n")

	fmt.Fprint(w, "_meshctl_flags() {\n\tcase $1 in\n")
	tree.walk(func(s *compSpec) {
		var names []string
		for _, f := range s.flags {
			names = append(names, f.name)
		}
		fmt.Fprintf(w, "\t%s) echo %s ;;\n", shq(s.path), shq(strings.Join(names, " ")))
	})
	fmt.Fprint(w, "\tesac\n}\n\n")

	// The global flags are the same after every command.
	fmt.Fprint(w, "_meshctl_flagarg() {\n\tcase \"$1 $2\" in\n")
	tree.walk(func(s *compSpec) {
		for _, f := range s.flags {
			if f.kind != "" && !slices.Contains(tree.flags, f) {
				fmt.Fprintf(w, "\t%s) echo %s ;;\n", shq(s.path+" "+f.name), shq(f.kind))
			}
		}
	})
	for _, f := range tree.flags {
		if f.kind != "" {
			fmt.Fprintf(w, "\t*%s) echo %s ;;\n", shq(" "+f.name), shq(f.kind))
		}
	}
	fmt.Fprint(w, "\t*) return 1 ;;\n\tesac\n}\n\n")

	fmt.Fprint(w, "_meshctl_arg() {\n\tcase \"$1 $2\" in\n")
	tree.walk(func(s *compSpec) {
		for i, k := range s.args {
			if k != kindNone {
				fmt.Fprintf(w, "\t%s) echo %s ;;\n", shq(fmt.Sprintf("%s %d", s.path, i)), shq(k))
			}
		}
		if s.more != "" && s.more != kindNone {
			fmt.Fprintf(w, "\t%s) echo %s ;;\n", shq(s.path+" *"), shq(s.more))
		}
	})
	fmt.Fprint(w, "\tesac\n}\n")
}

// The scripts' own logic. Both walk the words before the cursor the same
// way: flags (and the value of those that take one) are skipped, "--"
// ends them, words naming a subcommand extend the command's path, and the
// rest are positional arguments. --home is kept, so that channel and
// member names come from the home the line is about.

const bashCompletionHead = `# bash completion for meshctl, generated by 'meshctl completion bash'.
# Load it in this shell with: source <(meshctl completion bash)

`

const bashCompletionTail = `
# _meshctl_names KIND: channel or member names of the node, one a line.
# Names with spaces or quotes are left out.
_meshctl_names() {
	local -a cmd=("$_meshctl_bin")
	[[ $_meshctl_bin == "~/"* ]] && cmd=("$HOME/${_meshctl_bin#"~/"}")
	[[ -n $_meshctl_home ]] && cmd+=(--home "$_meshctl_home")
	case $1 in
	channel) cmd+=(channel list --json) ;;
	peer) cmd+=(roster show --json) ;;
	*) return ;;
	esac
	command -v timeout >/dev/null 2>&1 && cmd=(timeout 3 "${cmd[@]}")
	"${cmd[@]}" 2>/dev/null </dev/null |
		sed -n 's/^[[:space:]]*"name":[[:space:]]*"\([^"\\[:space:]]*\)".*/\1/p' | sort -u
}

# _meshctl_complete KIND: fill COMPREPLY for the word under the cursor.
_meshctl_complete() {
	local n c
	case $1 in
	file)
		compopt -o filenames 2>/dev/null
		mapfile -t COMPREPLY < <(compgen -f -- "$cur") ;;
	dir)
		compopt -o filenames 2>/dev/null
		mapfile -t COMPREPLY < <(compgen -d -- "$cur") ;;
	'words '*)
		mapfile -t COMPREPLY < <(compgen -W "${1#words }" -- "$cur") ;;
	command)
		mapfile -t COMPREPLY < <(compgen -W "$(_meshctl_subs "${pos[*]}")" -- "$cur") ;;
	channel | peer)
		mapfile -t COMPREPLY < <(compgen -W "$(_meshctl_names "$1")" -- "$cur") ;;
	'channel#')
		# '#NAME': an unquoted # would start a comment, so offer \#NAME.
		c=${cur#\\}
		c=${c#\#}
		[[ $cur == "" || $cur == \#* || $cur == \\\#* ]] || return
		for n in $(_meshctl_names channel); do
			[[ $n == "$c"* ]] && COMPREPLY+=("\\#$n")
		done ;;
	esac
}

_meshctl() {
	local cur=${COMP_WORDS[COMP_CWORD]}
	local _meshctl_bin=${COMP_WORDS[0]} _meshctl_home=
	local cmdpath= w name k kind= flagsdone= i
	local -a pos=()
	COMPREPLY=()
	for ((i = 1; i < COMP_CWORD; i++)); do
		w=${COMP_WORDS[i]}
		if [[ -z $flagsdone && $w == -- ]]; then
			flagsdone=1
		elif [[ -z $flagsdone && $w == -?* ]]; then
			name=${w#-}
			name=--${name#-}
			if ! k=$(_meshctl_flagarg "$cmdpath" "${name%%=*}"); then
				continue
			elif [[ $name == *=* ]]; then
				[[ ${name%%=*} == --home ]] && _meshctl_home=${w#*=}
			elif [[ ${COMP_WORDS[i+1]} == = ]]; then
				# bash splits --flag=value at the '='.
				if ((i + 2 >= COMP_CWORD)); then
					kind=$k
					[[ $cur == = ]] && cur=
					break
				fi
				[[ $name == --home ]] && _meshctl_home=${COMP_WORDS[i+2]}
				((i += 2))
			elif ((i + 1 == COMP_CWORD)); then
				kind=$k
				break
			else
				((i++))
				[[ $name == --home ]] && _meshctl_home=${COMP_WORDS[i]}
			fi
		elif ((${#pos[@]} == 0)) && [[ " $(_meshctl_subs "$cmdpath") " == *" $w "* ]]; then
			cmdpath=${cmdpath:+$cmdpath }$w
		else
			pos+=("$w")
		fi
	done
	if [[ -n $kind ]]; then
		_meshctl_complete "$kind"
		return 0
	fi
	if [[ -z $flagsdone && $cur == -* ]]; then
		mapfile -t COMPREPLY < <(compgen -W "$(_meshctl_flags "$cmdpath")" -- "$cur")
		return 0
	fi
	if ((${#pos[@]} == 0)) && [[ -n $(_meshctl_subs "$cmdpath") ]]; then
		mapfile -t COMPREPLY < <(compgen -W "$(_meshctl_subs "$cmdpath")" -- "$cur")
		return 0
	fi
	kind=$(_meshctl_arg "$cmdpath" "${#pos[@]}")
	[[ -n $kind ]] || kind=$(_meshctl_arg "$cmdpath" '*')
	_meshctl_complete "$kind"
	return 0
}

complete -F _meshctl meshctl
`

// writeBashCompletion writes the bash completion script of tree.
func writeBashCompletion(w io.Writer, tree *compSpec) error {
	var b strings.Builder
	b.WriteString(bashCompletionHead)
	writeCompletionData(&b, tree)
	b.WriteString(bashCompletionTail)
	_, err := io.WriteString(w, b.String())
	return err
}

const zshCompletionHead = `#compdef meshctl
# zsh completion for meshctl, generated by 'meshctl completion zsh'.
# Install it as _meshctl in a directory of $fpath, or load it in this
# shell (after compinit) with: source <(meshctl completion zsh)

`

const zshCompletionTail = `
# _meshctl_names KIND: channel or member names of the node, one a line.
_meshctl_names() {
	local -a cmd
	cmd=(${~_meshctl_bin})
	[[ -n $_meshctl_home ]] && cmd+=(--home ${~_meshctl_home})
	case $1 in
	channel) cmd+=(channel list --json) ;;
	peer) cmd+=(roster show --json) ;;
	*) return ;;
	esac
	(( $+commands[timeout] )) && cmd=(timeout 3 $cmd)
	$cmd 2>/dev/null </dev/null |
		sed -n 's/^[[:space:]]*"name":[[:space:]]*"\([^"\\[:space:]]*\)".*/\1/p' | sort -u
}

# _meshctl_complete KIND: offer the matches for the word under the cursor.
_meshctl_complete() {
	local -a names descs
	case $1 in
	file) _files ;;
	dir) _files -/ ;;
	'words '*) compadd -- ${=${1#words }} ;;
	command)
		_meshctl_describe "${(j: :)pos}"
		(( $#descs )) && _describe 'command' descs ;;
	channel | peer)
		names=(${(f)"$(_meshctl_names $1)"})
		compadd -- $names ;;
	'channel#')
		names=(${(f)"$(_meshctl_names channel)"})
		(( $#names )) && compadd -- "#"${^names} ;;
	esac
}

_meshctl() {
	local cur=${words[CURRENT]}
	local _meshctl_bin=${words[1]} _meshctl_home=
	local cmdpath= w name k kind= flagsdone= i
	local -a pos descs
	for ((i = 2; i < CURRENT; i++)); do
		w=${words[i]}
		if [[ -z $flagsdone && $w == -- ]]; then
			flagsdone=1
		elif [[ -z $flagsdone && $w == -?* ]]; then
			name=${w#-}
			name=--${name#-}
			if ! k=$(_meshctl_flagarg "$cmdpath" "${name%%=*}"); then
				continue
			elif [[ $name == *=* ]]; then
				[[ ${name%%=*} == --home ]] && _meshctl_home=${w#*=}
			elif ((i + 1 == CURRENT)); then
				kind=$k
				break
			else
				((i++))
				[[ $name == --home ]] && _meshctl_home=${words[i]}
			fi
		elif ((${#pos} == 0)) && [[ " $(_meshctl_subs "$cmdpath") " == *" $w "* ]]; then
			cmdpath=${cmdpath:+$cmdpath }$w
		else
			pos+=("$w")
		fi
	done
	if [[ -z $kind && -z $flagsdone && $cur == -*=* ]]; then
		name=${cur%%=*}
		name=--${${name#-}#-}
		if kind=$(_meshctl_flagarg "$cmdpath" "$name"); then
			compset -P '*='
		else
			return 1
		fi
	fi
	if [[ -n $kind ]]; then
		_meshctl_complete "$kind"
		return
	fi
	if [[ -z $flagsdone && $cur == -* ]]; then
		compadd -- ${=$(_meshctl_flags "$cmdpath")}
		return
	fi
	if ((${#pos} == 0)) && [[ -n $(_meshctl_subs "$cmdpath") ]]; then
		_meshctl_describe "$cmdpath"
		_describe 'command' descs
		return
	fi
	kind=$(_meshctl_arg "$cmdpath" "${#pos}")
	[[ -n $kind ]] || kind=$(_meshctl_arg "$cmdpath" '*')
	_meshctl_complete "$kind"
}

if [[ $zsh_eval_context[-1] == loadautofunc ]]; then
	_meshctl "$@"
else
	compdef _meshctl meshctl
fi
`

// writeZshCompletion writes the zsh completion script of tree.
func writeZshCompletion(w io.Writer, tree *compSpec) error {
	var b strings.Builder
	b.WriteString(zshCompletionHead)
	writeCompletionData(&b, tree)
	// _meshctl_describe PATH sets descs to the subcommands of PATH, each
	// "name:summary", for _describe.
	b.WriteString("\n_meshctl_describe() {\n\tcase $1 in\n")
	tree.walk(func(s *compSpec) {
		if len(s.subs) == 0 {
			return
		}
		var items []string
		for _, sub := range s.subs {
			items = append(items, shq(sub.lastWord()+":"+sub.summary))
		}
		fmt.Fprintf(&b, "\t%s) descs=(%s) ;;\n", shq(s.path), strings.Join(items, " "))
	})
	b.WriteString("\t*) descs=() ;;\n\tesac\n}\n")
	b.WriteString(zshCompletionTail)
	_, err := io.WriteString(w, b.String())
	return err
}
