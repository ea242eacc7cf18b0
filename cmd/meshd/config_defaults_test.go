package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshd/meshd/internal/testpar"
	"github.com/meshd/meshd/node"
)

// daemonDefaults are the keys that set node.Config but whose default is
// meshd's own, not the node's: it listens on DefaultListen where a node
// built by hand listens on its home's socket alone, and a mailbox group
// is resolved to a gid, which has no name to give back.
var daemonDefaults = map[string]bool{"listen": true, "mailbox_group": true}

// TestConfigDefaultsFromNode: every key that sets node.Config shows, in
// --print-config, the default of node.DefaultConfig (and of transport's,
// within it), and meshd's defaults all applied give node.DefaultConfig
// back. A new key fails here until its entry reads its default with
// fromNode.
func TestConfigDefaultsFromNode(t *testing.T) {
	testpar.Parallel(t)
	home := filepath.Join(t.TempDir(), "h")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"--home", home, "--print-config"}, &stdout, &stderr, envOf(nil)); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var printed map[string]json.RawMessage
	if err := json.Unmarshal(stdout.Bytes(), &printed); err != nil {
		t.Fatal(err)
	}
	nd := node.DefaultConfig()
	for i := range configKeys {
		k := &configKeys[i]
		switch {
		case k.fromNode != nil:
			if k.key == "home" {
				continue // given above
			}
			want, err := json.Marshal(k.fromNode(&nd))
			if err != nil {
				t.Fatal(err)
			}
			if got := printed[k.key]; !bytes.Equal(got, want) {
				t.Errorf("--print-config shows %s = %s, node.DefaultConfig %s", k.key, got, want)
			}
		case k.apply != nil && !daemonDefaults[k.key]:
			t.Errorf("%s sets node.Config but has no fromNode: give it one, so that its default is node.DefaultConfig's", k.key)
		}
	}
	nc, _, err := nodeConfig(defaultFileConfig(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	nc.Listen = nil // daemonDefaults
	nc.Logger, nd.Logger, nc.Transport.Logger, nd.Transport.Logger = nil, nil, nil, nil
	if !reflect.DeepEqual(nc, nd) {
		t.Errorf("meshd's defaults give\n%+v\nnode.DefaultConfig is\n%+v", nc, nd)
	}
}

// roundTripValue gives the value TestConfigKeysRoundTrip sets a key to
// where the one it derives from the default would not be valid.
var roundTripValue = map[string]any{}

// TestConfigKeysRoundTrip sets each key that reads its default from the
// node to another value in a config file, and checks that the value
// reaches node.Config: fromNode of the config meshd builds gives it back.
func TestConfigKeysRoundTrip(t *testing.T) {
	testpar.Parallel(t)
	dir := t.TempDir()
	for i := range configKeys {
		k := &configKeys[i]
		if k.fromNode == nil {
			continue
		}
		v, ok := roundTripValue[k.key]
		if !ok {
			v = otherValue(k.def)
		}
		var text string
		switch v := v.(type) {
		case string:
			text = strconv.Quote(v)
		case []string:
			text = "[" + strconv.Quote(v[0]) + "]"
		default:
			text = fmt.Sprint(v)
		}
		p := filepath.Join(dir, k.key+".toml")
		if err := os.WriteFile(p, []byte(k.key+" = "+text+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		c := defaultFileConfig()
		if err := loadFile(p, &c); err != nil {
			t.Errorf("%s = %s: %v", k.key, text, err)
			continue
		}
		nc, _, err := nodeConfig(c, io.Discard)
		if err != nil {
			t.Errorf("%s = %s: %v (add a valid value to roundTripValue)", k.key, text, err)
			continue
		}
		if got := k.fromNode(&nc); !reflect.DeepEqual(got, v) {
			t.Errorf("%s = %s in the file: node.Config gives back %#v", k.key, text, got)
		}
	}
}

// otherValue returns a value of def's type that is not def: a duration a
// second longer, a number one more, the other boolean, another name or
// address.
func otherValue(def any) any {
	switch d := def.(type) {
	case string:
		if dur, err := time.ParseDuration(d); err == nil {
			return durText(dur + time.Second)
		}
		return "x-" + strings.TrimSpace(d) + "other"
	case []string:
		return []string{"tcp://192.0.2.7:7437"}
	case bool:
		return !d
	case int:
		return d + 1
	}
	panic(fmt.Sprintf("no other value for %T", def))
}
