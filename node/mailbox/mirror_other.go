//go:build !linux

package mailbox

// nativeSys are the portable forms: other systems have neither
// renameat2 nor syncfs.
var nativeSys = portableSys
