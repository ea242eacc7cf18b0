package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
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
		return a.noDaemon(err)
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
// arguments: check there are none, one bounded call to meshd, and the --json output.
// It returns the answer for text rendering, with printed set when --json
// already printed it.
func fetch[T any](a *app, pos []string, get func(*api.Client, context.Context) (T, error)) (v T, printed bool, err error) {
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

// noDaemon tells apart why the control socket did not answer, which the
// control client reports alike: no socket (ENOENT: meshd is not running),
// a socket nobody listens on (ECONNREFUSED: meshd died and left it), and
// a socket this user may not open (EACCES or EPERM: the node belongs to
// another user, like the meshd user of the README's systemd unit). Only
// the first two get the hint to start meshd: for the third, a second
// meshd would be refused the home anyway.
func (a *app) noDaemon(err error) error {
	h := a.home()
	sock := h.ControlSocket()
	conn, derr := net.DialTimeout("unix", sock, 2*time.Second)
	switch {
	case derr == nil:
		// It answers now: it was starting or restarting.
		conn.Close()
		return withHint(err, "meshd answers now: run the command again")
	case errors.Is(derr, syscall.EACCES), errors.Is(derr, syscall.EPERM):
		owner, uid := ownerOf(sock, h.Dir)
		cmd := "COMMAND"
		if a.cmd != nil {
			cmd = a.cmd.name
		}
		me := "uid " + strconv.Itoa(os.Getuid())
		if u, err := user.Current(); err == nil {
			me = "user " + u.Username
		}
		e := fmt.Errorf("%w: the control socket %s belongs to %s, and %s may not open it", fs.ErrPermission, sock, owner, me)
		if uid < 0 {
			return withHint(e, "run meshctl as the user that runs meshd, with --home %s", h.Dir)
		}
		sudoUser := owner
		if _, err := user.Lookup(owner); err != nil {
			sudoUser = "'#" + strconv.Itoa(uid) + "'" // sudo's form for a uid without a name
		}
		return withHint(e, "run as %s: sudo -u %s meshctl --home %s %s", owner, sudoUser, h.Dir, cmd)
	case errors.Is(derr, syscall.ECONNREFUSED):
		return withHint(fmt.Errorf("%w: nothing listens on the control socket %s (a meshd that stopped without removing it left it)", api.ErrNoDaemon, sock),
			"start it with: meshd --home %s", h.Dir)
	}
	return withHint(err, "start it with: meshd --home %s", h.Dir)
}

// ownerOf names the user that owns path, else the nearest directory
// above it this user may stat (the home is 0700, so its socket often
// cannot be stat'ed), with that uid; ("an unknown user", -1) if none.
func ownerOf(path, homeDir string) (string, int) {
	for _, p := range []string{path, homeDir, filepath.Dir(homeDir)} {
		fi, err := os.Stat(p)
		if err != nil {
			continue
		}
		uid, ok := fileUID(fi)
		if !ok {
			break
		}
		if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
			return u.Username, uid
		}
		return "uid " + strconv.Itoa(uid), uid
	}
	return "an unknown user", -1
}
