package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

const usageRosterRekey = `usage: meshctl roster rekey MEMBER NEWKEY [--grace D] [--file FILE] [--out FILE] [--json]

Move MEMBER (a key, fingerprint or name) to the public key NEWKEY (the full
"ed25519:..." text that 'meshctl rekey' prints on the member's machine, or
'meshctl id' on a machine that replaces it), as the next version signed by
this admin. The member keeps its name, role and archive flag.

The old key stays valid for the grace window D (default 24h): links and
messages by it are accepted until then (plus 30s for clock differences),
so the member's node can switch over without losing a message. Then every
node closes its links and drops what it signs (drop.retired_key).

A key that leaked, or a machine that was lost: use --grace 0. The old key
is revoked as soon as each node applies this roster, as if the member had
been removed; its name and role go to the new key.

Publish the result like any roster edit ('meshctl roster publish').

flags:
  --grace D     how long the old key stays valid (24h, 90m, 0); default 24h
` + usageEditFlags + `
examples:
  meshctl roster rekey bob ed25519:NEWKEY
  meshctl roster rekey bob ed25519:NEWKEY --grace 2h
  meshctl roster rekey bob ed25519:NEWKEY --grace 0     (compromised key)
`

// maxGrace bounds the grace window: a rotation is meant to be short.
const maxGrace = 90 * 24 * time.Hour

// rekeyEditJSON is the rotation part of roster rekey's JSON output.
type rekeyEditJSON struct {
	Name           string `json:"name,omitempty"`
	Key            string `json:"key"`
	Fingerprint    string `json:"fingerprint"`
	OldKey         string `json:"old_key"`
	OldFingerprint string `json:"old_fingerprint"`
	// OldValidUntil is when the old key stops being accepted (RFC 3339),
	// empty when it is revoked at once.
	OldValidUntil string `json:"old_valid_until,omitempty"`
	Revoked       bool   `json:"revoked"`
}

// rosterRekeyFlags are the flags of 'meshctl roster rekey'.
type rosterRekeyFlags struct {
	grace time.Duration
	ef    editFlags
}

func (fl *rosterRekeyFlags) define(fs *flag.FlagSet) {
	fs.DurationVar(&fl.grace, "grace", 24*time.Hour, "")
	fl.ef.define(fs)
}

func runRosterRekey(a *app, fl *rosterRekeyFlags, pos []string) error {
	if err := a.nargs(pos, 2, 2); err != nil {
		return err
	}
	if fl.grace < 0 || fl.grace > maxGrace {
		return a.usageErrorf("--grace %s: want 0 (revoke now) up to %s", fl.grace, maxGrace)
	}
	key, err := proto.ParsePubKey(pos[1])
	if err != nil {
		return withHint(fmt.Errorf("NEWKEY: %w", err), "give the full ed25519:... key that 'meshctl rekey' printed on the member's machine")
	}
	var j rekeyEditJSON
	err = a.editRosterWith(fl.ef, func(cur, next *roster.Roster) (string, error) {
		m, err := resolveMember(cur, pos[0])
		if err != nil {
			return "", err
		}
		var until int64
		if fl.grace > 0 {
			until = time.Now().Add(fl.grace).UnixMilli()
		}
		if err := next.Rekey(m.Key, key, until); err != nil {
			return "", err
		}
		j = rekeyEditJSON{Name: m.Name, Key: key.String(), Fingerprint: key.Fingerprint(),
			OldKey: m.Key.String(), OldFingerprint: m.Key.Fingerprint(), Revoked: until == 0}
		change := fmt.Sprintf("%s moves to key %s", m.Label(), key.Fingerprint())
		if until == 0 {
			return change + "; the old key is revoked now", nil
		}
		t := time.UnixMilli(until).UTC().Format(time.RFC3339Nano)
		j.OldValidUntil = t
		return change + "; the old key is accepted until " + t, nil
	}, func(res *editResult) { res.Rekey = &j })
	return err
}
