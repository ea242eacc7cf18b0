package home

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/meshd/meshd/proto"
)

// ErrNoNextKey: the home holds no pending key (see [Home.MakeNextKey]).
var ErrNoNextKey = errors.New("no pending key")

// NextKeyPath is the pending key of a key rotation: made by `meshctl
// rekey`, it becomes the identity once the roster lists it.
func (h Home) NextKeyPath() string { return h.path("identity-next.key") }

// PrevKeyPath is the identity key before the last rotation, kept for the
// record; nothing reads it, and it may be deleted once its grace window
// has closed.
func (h Home) PrevKeyPath() string { return h.path("identity-prev.key") }

// MakeNextKey returns the pending key's public half, making the key first
// if there is none (created says so). An existing pending key is never
// replaced.
func (h Home) MakeNextKey() (pub proto.PubKey, created bool, err error) {
	if _, err := os.Lstat(h.NextKeyPath()); errors.Is(err, fs.ErrNotExist) {
		_, key, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return proto.PubKey{}, false, fmt.Errorf("generate key: %w", err)
		}
		block := pem.EncodeToMemory(&pem.Block{Type: PEMType, Bytes: key.Seed()})
		err = createAtomic(h.NextKeyPath(), block, 0o600)
		if err != nil && !errors.Is(err, fs.ErrExist) {
			return proto.PubKey{}, false, err
		}
		created = err == nil
	} else if err != nil {
		return proto.PubKey{}, false, fmt.Errorf("pending key: %w", err)
	}
	key, err := h.LoadNextKey()
	if err != nil {
		return proto.PubKey{}, false, err
	}
	return proto.PubKeyOf(key), created, nil
}

// LoadNextKey reads the pending key; it fails with [ErrNoNextKey] when
// there is none.
func (h Home) LoadNextKey() (ed25519.PrivateKey, error) {
	path := h.NextKeyPath()
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w in %s", ErrNoNextKey, h.Dir)
	}
	if err != nil {
		return nil, fmt.Errorf("pending key: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("pending key: %w", err)
	}
	if perm := st.Mode().Perm(); !st.Mode().IsRegular() || perm&0o077 != 0 {
		return nil, fmt.Errorf("%w: %s has mode %v; run `chmod 600 %s`", ErrKeyPermissions, path, st.Mode(), path)
	}
	data, err := readCapped(f, path)
	if err != nil {
		return nil, err
	}
	key, err := parseKeyFile(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %s is damaged: %v; remove it and run `meshctl rekey` again", ErrBadKeyFile, path, err)
	}
	return key, nil
}

// DropNextKey removes the pending key, if any.
func (h Home) DropNextKey() error {
	if err := os.Remove(h.NextKeyPath()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove pending key: %w", err)
	}
	return nil
}

// AdoptNextKey makes the pending key the identity: the current key is
// copied to [Home.PrevKeyPath], the pending key takes its place and
// identity.pub follows. Every step leaves a home that loads: until the
// rename the old key is the identity, after it the new one (identity.pub
// is removed first and written last).
func (h Home) AdoptNextKey() (Identity, error) {
	next, err := h.LoadNextKey()
	if err != nil {
		return Identity{}, err
	}
	old, err := os.ReadFile(h.KeyPath())
	if err != nil {
		return Identity{}, fmt.Errorf("rekey: %w", err)
	}
	if err := WriteFileAtomic(h.PrevKeyPath(), old, 0o600); err != nil {
		return Identity{}, fmt.Errorf("rekey: keep the previous key: %w", err)
	}
	if err := os.Remove(h.PubPath()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return Identity{}, fmt.Errorf("rekey: %w", err)
	}
	if err := os.Rename(h.NextKeyPath(), h.KeyPath()); err != nil {
		return Identity{}, fmt.Errorf("rekey: %w", err)
	}
	if err := WriteFileAtomic(h.PubPath(), []byte(proto.PubKeyOf(next).String()+"\n"), 0o644); err != nil {
		return Identity{}, err
	}
	return h.LoadIdentity()
}
