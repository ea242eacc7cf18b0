package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/meshd/meshd/channel"
	"github.com/meshd/meshd/node/mailbox"
)

const usageVerify = `usage: meshctl verify FILE... [--json]

Check mailbox files offline, without meshd. Each FILE (a file of
mailbox/<date>/inbox/, or "-" for standard input) must carry an envelope
whose signature verifies, and its headers and body must say exactly what
that envelope says. The sender's name and the channel's or peer's name are
checked against the roster and the channel policies of the home directory
when it has them, and reported as unchecked otherwise. Priority and Source
are notes of the receiving node, not covered by the signature. The files
a message lists as attachments, in the mailbox's
<date>/attachments/<the file's name without .txt>/, must match their signed
size and SHA-256; one not fetched yet is reported as absent.

Prints "ok FILE: ..." for each file that verifies and "meshctl: FILE: ..."
with the first difference for each that does not. Exits 0 if every file
verifies, 1 otherwise.

examples:
  find ~/.meshd/mailbox/2026-11-21/inbox -name '*.txt' -print0 | xargs -0 meshctl verify
`

// maxMailboxFile caps a mailbox file read by verify: a 256 KiB body,
// indented as JSON, and the armor block fit with room to spare.
const maxMailboxFile = 16 << 20

type mailVerifyResult struct {
	File      string          `json:"file"`
	OK        bool            `json:"ok"`
	Error     string          `json:"error,omitempty"`
	Field     string          `json:"field,omitempty"` // what differs, for a mismatch
	Kind      string          `json:"kind,omitempty"`
	MessageID string          `json:"message_id,omitempty"`
	From      *mailVerifyFrom `json:"from,omitempty"`
	To        string          `json:"to,omitempty"`
	Date      string          `json:"date,omitempty"`
	Priority  string          `json:"priority,omitempty"`
	Source    string          `json:"source,omitempty"`
	Unsigned  []string        `json:"unsigned,omitempty"`
	Unchecked []string        `json:"unchecked,omitempty"`
	// Attachments: the files beside the message, checked against the
	// signed hashes.
	Attachments []mailVerifyAttachment `json:"attachments,omitempty"`
}

type mailVerifyFrom struct {
	Key         string `json:"key"`
	Fingerprint string `json:"fingerprint"`
	Name        string `json:"name,omitempty"`
	Role        string `json:"role,omitempty"`
}

func runVerify(a *app, _ *noFlags, pos []string) error {
	if len(pos) == 0 {
		return a.usageErrorf("missing FILE")
	}
	opts, err := a.verifyOptions()
	if err != nil {
		return err
	}
	results := make([]mailVerifyResult, 0, len(pos))
	failed := 0
	for _, file := range pos {
		res := a.verifyMailFile(file, opts)
		if !res.OK {
			failed++
			if !a.json {
				fmt.Fprintf(a.Stderr, "meshctl: %s: %s\n", file, res.Error)
			}
		} else if !a.json {
			fmt.Fprintf(a.Stdout, "ok %s\n", describeVerified(res))
		}
		results = append(results, res)
	}
	if a.json {
		if err := a.printJSON(results); err != nil {
			return err
		}
	}
	if failed > 0 {
		return exitStatus(exitError)
	}
	return nil
}

// verifyOptions loads the home's roster and channel policies, where there
// are any.
func (a *app) verifyOptions() (mailbox.VerifyOptions, error) {
	var opts mailbox.VerifyOptions
	h := a.home()
	r, err := h.LoadRoster()
	switch {
	case err == nil:
		opts.Roster = r
	case !errors.Is(err, fs.ErrNotExist):
		return opts, withHint(err, "the names in the files cannot be checked against a broken roster; move %s away to verify without it", h.RosterPath())
	}
	dir := filepath.Join(h.Dir, "channels")
	if _, err := os.Stat(dir); err == nil {
		set := channel.NewSet()
		if err := set.Load(dir); err != nil {
			// The policies that loaded are used; say which did not.
			fmt.Fprintf(a.Stderr, "meshctl: warning: %s\n", strings.ReplaceAll(err.Error(), "\n", "; "))
		}
		opts.Channels = set
	}
	return opts, nil
}

func (a *app) verifyMailFile(file string, opts mailbox.VerifyOptions) mailVerifyResult {
	res := mailVerifyResult{File: file}
	b, err := a.readMailFile(file)
	if err == nil {
		var v *mailbox.Verified
		if v, err = mailbox.Verify(b, opts); err == nil {
			fillVerified(&res, v)
			if res.Attachments, err = verifyAttachments(file, v.Env.Attachments()); err == nil {
				return res
			}
			res.OK = false
		}
	}
	res.Error = err.Error()
	var me *mailbox.MismatchError
	if errors.As(err, &me) {
		res.Field = me.Field
	}
	return res
}

func (a *app) readMailFile(file string) ([]byte, error) {
	var r io.Reader = a.Stdin
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, maxMailboxFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxMailboxFile {
		return nil, fmt.Errorf("larger than %d bytes: not a mailbox file", maxMailboxFile)
	}
	return b, nil
}

func fillVerified(res *mailVerifyResult, v *mailbox.Verified) {
	res.OK = true
	res.Kind = v.Env.Kind.String()
	res.MessageID = v.Env.ID.String()
	res.From = &mailVerifyFrom{Key: v.Signer.String(), Fingerprint: v.Signer.Fingerprint(), Name: v.Name}
	if v.Role.Valid() {
		res.From.Role = v.Role.String()
	}
	res.To = v.To
	res.Date = v.Env.Time().UTC().Format("2006-01-02T15:04:05.000Z")
	res.Priority = v.Priority
	if v.FromHistory {
		res.Source = "history"
	}
	res.Unsigned = v.Unsigned
	res.Unchecked = v.Unchecked
}

// describeVerified is the text line of a file that verified:
// "FILE: message from alice (1a2b3c4d5e6f7a8b, operator) to #general, signed".
func describeVerified(res mailVerifyResult) string {
	var who string
	inner := res.From.Fingerprint
	if res.From.Role != "" {
		inner += ", " + res.From.Role
	}
	if res.From.Name != "" {
		who = res.From.Name + " (" + inner + ")"
	} else if res.From.Role != "" {
		who = res.From.Fingerprint + " (" + res.From.Role + ")"
	} else {
		who = res.From.Fingerprint
	}
	s := fmt.Sprintf("%s: %s from %s to %s, signed", res.File, res.Kind, who, res.To)
	if res.Source != "" {
		s += ", through history sync"
	}
	if len(res.Unchecked) > 0 {
		s += "; unchecked: " + strings.Join(res.Unchecked, ", ")
	}
	return s + describeAttachments(res.Attachments)
}
