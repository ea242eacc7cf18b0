package memnet_test

import (
	"crypto/ed25519"
	"testing"

	"github.com/meshd/meshd/transport"
)

// linkConfig is the link settings of a node of org "acme" on network nw.
func linkConfig(t *testing.T, nw transport.Network) transport.Config {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := transport.DefaultConfig()
	c.Identity = priv
	c.Org = "acme"
	c.Net = nw
	return c
}
