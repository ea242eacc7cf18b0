package home

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// PEMType is the PEM block type of the private key file. The block holds
// the 32-byte Ed25519 seed.
const PEMType = "MESHD ED25519 PRIVATE KEY"

// Errors callers decide on.
var (
	// ErrNoIdentity: the home has no private key yet.
	ErrNoIdentity = errors.New("no identity")
	// ErrKeyPermissions: the private key file is readable by group or others.
	ErrKeyPermissions = errors.New("private key file is accessible by others")
	// ErrBadKeyFile: the private key file does not hold a key.
	ErrBadKeyFile = errors.New("bad private key file")
)

// Identity is a node's key pair and display name.
type Identity struct {
	Key  ed25519.PrivateKey
	Pub  proto.PubKey
	Name string
}

// maxSmallFile bounds the identity and name files read back.
const maxSmallFile = 4 << 10

// Init makes sure the home has an identity. It creates the directory (mode
// 0700) and, if there is no key yet, a new Ed25519 key. An existing key is
// never replaced, not even by a concurrent Init. If name is not empty it
// becomes the node's name, replacing an earlier one. created reports
// whether the key is new.
func (h Home) Init(name string) (id Identity, created bool, err error) {
	if err := roster.CheckName(name); err != nil {
		return Identity{}, false, fmt.Errorf("init %s: %w", h.Dir, err)
	}
	if err := os.MkdirAll(h.Dir, 0o700); err != nil {
		return Identity{}, false, fmt.Errorf("init %s: %w", h.Dir, err)
	}
	if _, err := os.Lstat(h.KeyPath()); errors.Is(err, fs.ErrNotExist) {
		created, err = h.createKey()
		if err != nil {
			return Identity{}, false, err
		}
	} else if err != nil {
		return Identity{}, false, fmt.Errorf("init %s: %w", h.Dir, err)
	}
	id, err = h.LoadIdentity()
	if err != nil {
		return Identity{}, false, err
	}
	if created || !fileExists(h.PubPath()) {
		if err := WriteFileAtomic(h.PubPath(), []byte(id.Pub.String()+"\n"), 0o644); err != nil {
			return Identity{}, false, err
		}
	}
	if name != "" && name != id.Name {
		if err := WriteFileAtomic(h.NamePath(), []byte(name+"\n"), 0o644); err != nil {
			return Identity{}, false, err
		}
		id.Name = name
	}
	return id, created, nil
}

// createKey writes a new key unless one appears first; it reports whether
// it wrote one.
func (h Home) createKey() (bool, error) {
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return false, fmt.Errorf("generate key: %w", err)
	}
	block := pem.EncodeToMemory(&pem.Block{Type: PEMType, Bytes: key.Seed()})
	err = createAtomic(h.KeyPath(), block, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return false, nil // another Init won the race; use its key
	}
	if err != nil {
		return false, err
	}
	return true, nil
}

// LoadIdentity reads the node's key and name. It fails with [ErrNoIdentity]
// if there is no key, and with [ErrKeyPermissions] if the key file can be
// read by anyone but its owner.
func (h Home) LoadIdentity() (Identity, error) {
	path := h.KeyPath()
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Identity{}, fmt.Errorf("%w in %s: run `meshctl init` first", ErrNoIdentity, h.Dir)
	}
	if err != nil {
		return Identity{}, fmt.Errorf("load identity: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Identity{}, fmt.Errorf("load identity: %w", err)
	}
	if !st.Mode().IsRegular() {
		return Identity{}, fmt.Errorf("%w: %s is not a regular file; put the key file back from a backup", ErrBadKeyFile, path)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return Identity{}, fmt.Errorf("%w: %s has mode %04o; run `chmod 600 %s`", ErrKeyPermissions, path, perm, path)
	}
	data, err := readCapped(f, path)
	if err != nil {
		return Identity{}, err
	}
	key, err := parseKeyFile(data)
	if err != nil {
		return Identity{}, fmt.Errorf("%w: %s is damaged: %v; restore it from a backup (the node's identity is this key: a new one "+
			"is another node, which an admin must add to the roster: move the file aside, run `meshctl init` and `meshctl id`)", ErrBadKeyFile, path, err)
	}
	id := Identity{Key: key, Pub: proto.PubKeyOf(key)}

	// identity.pub is a convenience copy; if it disagrees, something
	// replaced one file but not the other, and the node must not guess.
	if pubText, err := os.ReadFile(h.PubPath()); err == nil {
		if got := strings.TrimSpace(string(pubText)); got != id.Pub.String() {
			return Identity{}, fmt.Errorf("%w: %s holds %q, but the private key's public key is %s; if %s is the right key, "+
				"remove %s and it is written again from the key", ErrBadKeyFile, h.PubPath(), got, id.Pub, path, h.PubPath())
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return Identity{}, fmt.Errorf("load identity: %w", err)
	}
	if id.Name, err = h.loadName(); err != nil {
		return Identity{}, err
	}
	return id, nil
}

func parseKeyFile(data []byte) (ed25519.PrivateKey, error) {
	block, rest := pem.Decode(data)
	if block == nil {
		return nil, errors.New("no PEM block")
	}
	if block.Type != PEMType {
		return nil, fmt.Errorf("PEM block type %q, want %q", block.Type, PEMType)
	}
	if len(block.Headers) != 0 {
		return nil, errors.New("unexpected PEM headers (encrypted keys are not supported)")
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		return nil, errors.New("data after the PEM block")
	}
	if len(block.Bytes) != ed25519.SeedSize {
		return nil, fmt.Errorf("seed of %d bytes, want %d", len(block.Bytes), ed25519.SeedSize)
	}
	return ed25519.NewKeyFromSeed(block.Bytes), nil
}

func (h Home) loadName() (string, error) {
	b, err := os.ReadFile(h.NamePath())
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("load name: %w", err)
	}
	if len(b) > maxSmallFile {
		return "", fmt.Errorf("load name: %s is %d bytes; remove it, or set the name again with `meshctl init --name NAME`", h.NamePath(), len(b))
	}
	name := strings.TrimSuffix(string(b), "\n")
	if err := roster.CheckStoredName(name); err != nil {
		return "", fmt.Errorf("load name from %s: %w; remove it, or set the name again with `meshctl init --name NAME`", h.NamePath(), err)
	}
	return name, nil
}

func readCapped(f *os.File, path string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(f, maxSmallFile+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(b) > maxSmallFile {
		return nil, fmt.Errorf("%w: %s is larger than %d bytes", ErrBadKeyFile, path, maxSmallFile)
	}
	return b, nil
}

func fileExists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}
