// Package home is the layout of a node's home directory and the file I/O
// around it: the identity key, the node name, the roster file and the lock
// that keeps a second meshd out. meshd and meshctl share it, so both agree
// on every path.
//
// Layout (the directory is created with mode 0700):
//
//	identity.key   Ed25519 seed, PEM "MESHD ED25519 PRIVATE KEY", mode 0600
//	identity.pub   the public key's text form, for humans and scripts
//	name           the node's display name, if one was given
//	roster.cbor    the current roster (a signed roster document)
//	meshd.toml     daemon configuration
//	meshd.lock     held with flock by the running meshd; holds its pid
//	meshd.sock     control API socket (HTTP over a Unix socket)
//	link.sock      Unix socket for links from meshd nodes on this host
//	history.db     bbolt history store
//	mailbox/       the plain-text mailbox mirror
//
// Every file this package writes is written atomically: a temporary file in
// the same directory, fsync, rename, fsync of the directory.
package home

import (
	"os"
	"path/filepath"
)

// EnvHome is the environment variable that names the home directory when
// no flag does.
const EnvHome = "MESH_HOME"

// DefaultDirName is the home directory's name under the user's home.
const DefaultDirName = ".meshd"

// Resolve returns the home directory to use: flag if set, else $MESH_HOME,
// else $HOME/.meshd.
func Resolve(flag string) string {
	if flag != "" {
		return flag
	}
	if env := os.Getenv(EnvHome); env != "" {
		return env
	}
	if u, err := os.UserHomeDir(); err == nil {
		return filepath.Join(u, DefaultDirName)
	}
	return DefaultDirName
}

// Home is a node's home directory.
type Home struct {
	Dir string
}

// Open returns the Home that [Resolve] picks for flag.
func Open(flag string) Home { return Home{Dir: Resolve(flag)} }

func (h Home) path(name string) string { return filepath.Join(h.Dir, name) }

// KeyPath is the private key file.
func (h Home) KeyPath() string { return h.path("identity.key") }

// PubPath is the public key file.
func (h Home) PubPath() string { return h.path("identity.pub") }

// NamePath is the file holding the node's display name.
func (h Home) NamePath() string { return h.path("name") }

// RosterPath is the current roster.
func (h Home) RosterPath() string { return h.path("roster.cbor") }

// ConfigPath is the daemon configuration file.
func (h Home) ConfigPath() string { return h.path("meshd.toml") }

// LockPath is the lock file a running meshd holds.
func (h Home) LockPath() string { return h.path("meshd.lock") }

// ControlSocket is the control API's Unix socket.
func (h Home) ControlSocket() string { return h.path("meshd.sock") }

// LinkSocket is the Unix socket for links from nodes on the same host.
func (h Home) LinkSocket() string { return h.path("link.sock") }

// DBPath is the history database.
func (h Home) DBPath() string { return h.path("history.db") }

// MailboxDir is the root of the mailbox mirror.
func (h Home) MailboxDir() string { return h.path("mailbox") }

// BlobsDir is the content-addressed store of attachments (node/blobs).
func (h Home) BlobsDir() string { return h.path("blobs") }
