package main

import (
	"errors"
	"fmt"
	"os/user"
	"runtime"
	"strconv"

	"github.com/meshd/meshd/node/mailbox"
)

// mailboxAccess turns the mailbox_group setting (a group name or a
// numeric gid; empty: none) into the mailbox's access.
func mailboxAccess(group string) (mailbox.Access, error) {
	if group == "" {
		return mailbox.OwnerOnly, nil
	}
	if runtime.GOOS == "windows" {
		return mailbox.Access{}, errors.New("mailbox group: not supported on windows; share the mailbox folder with an ACL instead")
	}
	if gid, err := strconv.Atoi(group); err == nil && gid >= 0 {
		return mailbox.GroupAccess(gid), nil
	}
	g, err := user.LookupGroup(group)
	if err != nil {
		return mailbox.Access{}, fmt.Errorf("mailbox group %q: %w", group, err)
	}
	gid, err := strconv.Atoi(g.Gid)
	if err != nil {
		return mailbox.Access{}, fmt.Errorf("mailbox group %q: gid %q is not a number", group, g.Gid)
	}
	return mailbox.GroupAccess(gid), nil
}
