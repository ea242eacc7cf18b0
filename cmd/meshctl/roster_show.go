package main

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

const usageRosterShow = `usage: meshctl roster show [FILE] [--json]

Show a roster: org, version, time, quorum, members (name, role, fingerprint,
key, archive flag) and who signed it. Without FILE, the home's roster.
Showing a roster checks its signatures, not its authority: see
'meshctl roster verify'.

examples:
  meshctl roster show
  meshctl roster show /tmp/roster-v4.cbor --json
`

type memberJSON struct {
	Name        string       `json:"name,omitempty"`
	Role        roster.Role  `json:"role"`
	Fingerprint string       `json:"fingerprint"`
	Key         proto.PubKey `json:"key"`
	Archive     bool         `json:"archive"`
	// PrevKey is the member's previous key during a rotation's grace
	// window, accepted until PrevUntil (RFC 3339).
	PrevKey         *proto.PubKey `json:"prev_key,omitempty"`
	PrevFingerprint string        `json:"prev_fingerprint,omitempty"`
	PrevUntil       string        `json:"prev_until,omitempty"`
}

type signerJSON struct {
	Name        string       `json:"name,omitempty"`
	Fingerprint string       `json:"fingerprint"`
	Key         proto.PubKey `json:"key"`
	Admin       bool         `json:"admin"` // an admin of this roster
}

type rosterJSON struct {
	File      string       `json:"file"`
	Org       string       `json:"org"`
	Version   uint64       `json:"version"`
	Timestamp int64        `json:"timestamp"` // Unix ms
	Time      string       `json:"time"`
	Quorum    int          `json:"quorum"`
	Admins    int          `json:"admins"`
	Members   []memberJSON `json:"members"`
	Signers   []signerJSON `json:"signers"`
}

func runRosterShow(a *app, _ *noFlags, pos []string) error {
	if err := a.nargs(pos, 0, 1); err != nil {
		return err
	}
	path := a.rosterPath("")
	if len(pos) == 1 {
		path = pos[0]
	}
	r, err := a.readRoster(path)
	if err != nil {
		return err
	}
	j := rosterJSON{File: path, Org: r.Org, Version: r.Version, Timestamp: r.Timestamp,
		Time:   time.UnixMilli(r.Timestamp).UTC().Format(time.RFC3339Nano),
		Quorum: r.Quorum(), Admins: len(r.Admins()), Members: []memberJSON{}, Signers: []signerJSON{}}
	members := slices.Clone(r.Members)
	// Admins first, then by name: the order a human looks for.
	slices.SortStableFunc(members, func(x, y roster.Member) int {
		return cmp.Or(cmp.Compare(y.Role, x.Role), cmp.Compare(x.Name, y.Name))
	})
	for _, m := range members {
		mj := memberJSON{Name: m.Name, Role: m.Role, Fingerprint: m.Key.Fingerprint(), Key: m.Key, Archive: m.Archive}
		if !m.PrevKey.IsZero() {
			mj.PrevKey, mj.PrevFingerprint = &m.PrevKey, m.PrevKey.Fingerprint()
			mj.PrevUntil = time.UnixMilli(m.PrevUntil).UTC().Format(time.RFC3339Nano)
		}
		j.Members = append(j.Members, mj)
	}
	for _, k := range r.Signers() {
		m, _ := r.Known(k)
		j.Signers = append(j.Signers, signerJSON{Name: m.Name, Fingerprint: k.Fingerprint(), Key: k, Admin: r.IsAdmin(k)})
	}
	if a.json {
		return a.printJSON(j)
	}

	tw := table(a.Stdout)
	fmt.Fprintf(tw, "org\t%s\n", j.Org)
	fmt.Fprintf(tw, "version\t%d\n", j.Version)
	fmt.Fprintf(tw, "time\t%s\n", j.Time)
	fmt.Fprintf(tw, "quorum\t%d of %d admins\n", j.Quorum, j.Admins)
	fmt.Fprintf(tw, "file\t%s\n", j.File)
	tw.Flush()

	fmt.Fprintf(a.Stdout, "\nmembers (%d):\n", len(j.Members))
	tw = table(a.Stdout)
	fmt.Fprintf(tw, "  NAME\tROLE\tARCHIVE\tFINGERPRINT\tKEY\n")
	for _, m := range j.Members {
		name, archive := nameCell(m.Name), "no"
		if m.Archive {
			archive = "yes"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", name, m.Role, archive, m.Fingerprint, m.Key)
	}
	tw.Flush()
	for _, m := range j.Members {
		if m.PrevKey != nil {
			fmt.Fprintf(a.Stdout, "  %s: previous key %s accepted until %s\n", nameCell(m.Name), m.PrevFingerprint, m.PrevUntil)
		}
	}

	fmt.Fprintf(a.Stdout, "\nsigned by (%d):\n", len(j.Signers))
	tw = table(a.Stdout)
	for _, s := range j.Signers {
		name, note := nameCell(s.Name), "admin"
		if !s.Admin {
			note = "not an admin of this version"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", name, s.Fingerprint, note)
	}
	return tw.Flush()
}
