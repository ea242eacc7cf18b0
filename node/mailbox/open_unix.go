//go:build !windows

package mailbox

import "syscall"

// openNoFollowNoBlock opens an outbox entry without following a symbolic
// link and without waiting for a FIFO's writer.
const openNoFollowNoBlock = syscall.O_NOFOLLOW | syscall.O_NONBLOCK
