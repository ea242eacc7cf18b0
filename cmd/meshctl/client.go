package main

import (
	"context"
	"errors"
	"time"

	"github.com/meshd/meshd/node/api"
)

// client returns a control-API client for the home's meshd.
func (a *app) client() *api.Client { return api.NewClient(a.home().ControlSocket()) }

// ctx returns a context bounded by the default control-call timeout.
func (a *app) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), api.DefaultTimeout)
}

// remoteErr adds the hint an error from meshd carries, or the hint to
// start meshd when none answers.
func (a *app) remoteErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, api.ErrNoDaemon) {
		return withHint(err, "start it with: meshd --home %s", a.home().Dir)
	}
	var re *api.RemoteError
	if errors.As(err, &re) && re.Hint != "" {
		return withHint(err, "%s", re.Hint)
	}
	return err
}

// ago renders a duration for humans: "3s", "4m12s", "2h3m".
func ago(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	default:
		return d.Round(time.Minute).String()
	}
}

// fetch runs the common part of a read-only online command that takes no
// arguments: parse, one bounded call to meshd, and the --json output.
// It returns the answer for text rendering, with printed set when --json
// already printed it.
func fetch[T any](a *app, args []string, get func(*api.Client, context.Context) (T, error)) (v T, printed bool, err error) {
	pos, err := a.parse(a.flagSet(), args)
	if err != nil {
		return v, false, err
	}
	if err := a.nargs(pos, 0, 0); err != nil {
		return v, false, err
	}
	ctx, cancel := a.ctx()
	defer cancel()
	if v, err = get(a.client(), ctx); err != nil {
		return v, false, a.remoteErr(err)
	}
	if a.json {
		return v, true, a.printJSON(v)
	}
	return v, false, nil
}
