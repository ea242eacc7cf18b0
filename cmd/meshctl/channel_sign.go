package main

import (
	"fmt"
	"os"

	"github.com/meshd/meshd/channel"
	"github.com/meshd/meshd/internal/fsutil"
	"github.com/meshd/meshd/node/api"
)

const usageChannelSign = `usage: meshctl channel sign FILE [--json]

Add this admin's signature to the channel policy version in FILE, in
place. The signed body is not changed, so the signatures already on it
stay valid. This is how other admins approve a channel edit ('meshctl
channel set --out FILE' or 'meshctl channel delete --out FILE') when the
roster's quorum is more than 1. Signatures count when they are by admins
of the roster in this node's home; this node must be one of them. No
daemon is needed.

examples:
  meshctl channel sign ops-v4.cbor
  meshctl channel publish ops-v4.cbor
`

const usageChannelPublish = `usage: meshctl channel publish FILE [--json]

Apply the channel policy version in FILE and spread it to the mesh, once
it carries the roster's quorum of admin signatures (one for a new
channel). meshd checks it as a version from a peer: signed by admins
only, the quorum for an edit, and newer than the version it holds (an
older one is refused as a rollback).

examples:
  meshctl channel publish ops-v4.cbor
`

// policyTally is what channel sign and the --out of channel set and
// delete report.
type policyTally struct {
	File       string `json:"file"`
	Channel    string `json:"channel"`
	ID         string `json:"id"`
	Version    uint64 `json:"version"`
	Signatures int    `json:"signatures"`
	Required   int    `json:"required"`
	Missing    int    `json:"missing"`
	Complete   bool   `json:"complete"`
}

func (a *app) printTally(t policyTally, verb string) error {
	t.Missing = max(t.Required-t.Signatures, 0)
	t.Complete = t.Missing == 0
	if a.json {
		return a.printJSON(t)
	}
	fmt.Fprintf(a.Stdout, "%s #%s v%d\n", verb, printable(t.Channel, false), t.Version)
	fmt.Fprintf(a.Stdout, "%d of %d required admin signatures\n", t.Signatures, t.Required)
	fmt.Fprintf(a.Stdout, "wrote %s\n", t.File)
	if t.Complete {
		fmt.Fprintf(a.Stdout, "publish it with: meshctl channel publish %s\n", t.File)
	} else {
		fmt.Fprintf(a.Stdout, "needs %d more admin %s: meshctl channel sign %s\n", t.Missing, plural(t.Missing, "signature", "signatures"), t.File)
	}
	return nil
}

// draftChannel has meshd sign the next version of channel name (without
// applying it) and writes it to file.
func (a *app) draftChannel(name string, in api.DraftChannel, file string) error {
	ctx, cancel := a.ctx()
	defer cancel()
	d, err := a.client().DraftChannel(ctx, name, in)
	if err != nil {
		return a.remoteErr(err)
	}
	if err := fsutil.WriteAtomic(file, d.Document, 0o644); err != nil {
		return err
	}
	return a.printTally(policyTally{File: file, Channel: d.Channel, ID: d.ID, Version: d.Version,
		Signatures: d.Signatures, Required: d.Required}, "signed")
}

func (a *app) readPolicy(file string) (*channel.Policy, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	p, err := channel.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return p, nil
}

func runChannelSign(a *app, _ *noFlags, pos []string) error {
	if err := a.nargs(pos, 1, 1); err != nil {
		return err
	}
	file := pos[0]
	id, err := a.identity()
	if err != nil {
		return err
	}
	p, err := a.readPolicy(file)
	if err != nil {
		return err
	}
	r, err := a.readRoster(a.home().RosterPath())
	if err != nil {
		return err
	}
	if p.Org != r.Org {
		return fmt.Errorf("will not sign: %s is for org %q, this node's roster for %q", p, p.Org, r.Org)
	}
	if err := requireAdmin(id, r); err != nil {
		return err
	}
	if err := p.Sign(id.Key); err != nil {
		return err
	}
	b, err := p.Encode()
	if err != nil {
		return err
	}
	if err := fsutil.WriteAtomic(file, b, 0o644); err != nil {
		return err
	}
	t := channel.CountSignatures(r, p)
	return a.printTally(policyTally{File: file, Channel: p.Name, ID: p.ID.String(), Version: p.Version,
		Signatures: t.Have, Required: t.Need}, "signed")
}

func runChannelPublish(a *app, _ *noFlags, pos []string) error {
	if err := a.nargs(pos, 1, 1); err != nil {
		return err
	}
	b, err := os.ReadFile(pos[0])
	if err != nil {
		return err
	}
	ctx, cancel := a.ctx()
	defer cancel()
	ch, err := a.client().PublishChannel(ctx, b)
	if err != nil {
		return a.remoteErr(err)
	}
	if a.json {
		return a.printJSON(ch)
	}
	fmt.Fprintf(a.Stdout, "published #%s v%d\n", printable(ch.Name, false), ch.Version)
	return writeChannel(a.Stdout, ch)
}
