package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/meshd/meshd/node/api"
)

// attachFlag collects repeated --attach FILE flags as absolute paths of
// regular files.
type attachFlag []string

func (f *attachFlag) String() string { return fmt.Sprint(*f) }

func (f *attachFlag) Set(v string) error {
	p, err := filepath.Abs(v)
	if err != nil {
		return err
	}
	st, err := os.Stat(p)
	if err != nil {
		return fmt.Errorf("attach %s: %w", v, errors.Unwrap(err))
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("attach %s: not a regular file", v)
	}
	*f = append(*f, p)
	return nil
}

const usageFetch = `usage: meshctl fetch ID [NAME] [--timeout DURATION] [--json]

Fetch the attachments of inbox item ID (all of them, or the one named
NAME) and wait until each is verified against its signed SHA-256 and
present. meshd fetches a DM's attachments as they arrive, and a channel
message's when smaller than attachment_channel_eager_max_kib; the rest
wait for this command. The files appear in the mailbox, in
<day>/attachments/<message file name>/, and 'meshctl inbox --json' names
their paths. A fetch cut short (a timeout, a restart) resumes where it
stopped.

flags:
  --timeout DURATION  how long to wait (default 10m); the fetch goes on after it

examples:
  meshctl fetch 0192a7c4-0000-7000-8000-000000000001
  meshctl fetch 0192a7c4-0000-7000-8000-000000000001 dataset.csv --json
`

// fetchFlags are the flags of 'meshctl fetch'.
type fetchFlags struct {
	timeout time.Duration
}

func (fl *fetchFlags) define(fs *flag.FlagSet) {
	fs.DurationVar(&fl.timeout, "timeout", 10*time.Minute, "")
}

func runFetch(a *app, fl *fetchFlags, pos []string) error {
	timeout := &fl.timeout
	if err := a.nargs(pos, 1, 2); err != nil {
		return err
	}
	in := api.Fetch{ID: pos[0]}
	if len(pos) == 2 {
		in.Name = pos[1]
	}
	if *timeout <= 0 {
		return a.usageErrorf("--timeout %v: want a positive duration, like 10m", *timeout)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	out, err := a.client().Fetch(ctx, in)
	if err != nil {
		return a.remoteErr(err)
	}
	if a.json {
		return a.printJSON(out)
	}
	for _, x := range out.Attachments {
		fmt.Fprintf(a.Stdout, "%s\t%d bytes\tsha256 %s\t%s\n", printable(x.Name, false), x.Size, x.SHA256, printable(x.Path, false))
	}
	return nil
}
