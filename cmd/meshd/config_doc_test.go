package main

import (
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"

	"github.com/meshd/meshd/internal/testpar"
)

// exampleConfig is the annotated example configuration.
var exampleConfig = filepath.Join("..", "..", "docs", "meshd.toml")

// TestConfigDocLoads loads docs/meshd.toml with meshd's own loader: it is
// valid, it sets every key of fileConfig, and, as its header says, to the
// key's default.
func TestConfigDocLoads(t *testing.T) {
	testpar.Parallel(t)
	cfg := defaultFileConfig()
	if err := loadFile(exampleConfig, &cfg); err != nil {
		t.Fatalf("the example does not load: %v", err)
	}
	b, err := os.ReadFile(exampleConfig)
	if err != nil {
		t.Fatal(err)
	}
	var set map[string]any
	if err := toml.Unmarshal(b, &set); err != nil {
		t.Fatal(err)
	}
	def := defaultFileConfig()
	for i := range configKeys {
		k := &configKeys[i]
		if _, ok := set[k.key]; !ok {
			t.Errorf("docs/meshd.toml does not set %s: add it, with its comment, set to its default", k.key)
			continue
		}
		if got, want := reflect.ValueOf(k.value(&cfg)), reflect.ValueOf(k.value(&def)); !sameValue(got, want) {
			t.Errorf("docs/meshd.toml sets %s = %v, but its default is %v", k.key, got, want)
		}
	}
	for key := range set {
		if !slices.ContainsFunc(configKeys, func(k configKey) bool { return k.key == key }) {
			t.Errorf("docs/meshd.toml sets %s, which meshd does not know", key)
		}
	}
}

// sameValue is reflect.DeepEqual, with an empty list equal to none.
func sameValue(a, b reflect.Value) bool {
	if a.Kind() == reflect.Slice && a.Len() == 0 && b.Len() == 0 {
		return true
	}
	return reflect.DeepEqual(a.Interface(), b.Interface())
}

var (
	docEnv  = regexp.MustCompile(`Env: (MESH_[A-Z0-9_]+|none)\b`)
	docFlag = regexp.MustCompile(`Flag: (--[a-z0-9-]+|none)\b`)
)

// TestConfigDocComments checks each key's comment in docs/meshd.toml: it
// starts with the key, gives its default, and names its environment
// variable and flag, and those really set the key.
func TestConfigDocComments(t *testing.T) {
	testpar.Parallel(t)
	b, err := os.ReadFile(exampleConfig)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	if !strings.Contains(text, "built-in default < this file < environment\n# (MESH_*) < command-line flags") {
		t.Errorf("docs/meshd.toml does not state the precedence")
	}
	lines := strings.Split(text, "\n")
	def := defaultFileConfig()
	for i := range configKeys {
		k := &configKeys[i]
		key := k.key
		comment := keyComment(lines, key)
		if !strings.HasPrefix(comment, key+": ") {
			t.Errorf("%s: the comment above it does not start with %q:\n%s", key, key+": ", comment)
			continue
		}
		if !strings.Contains(comment, "Default: ") {
			t.Errorf("%s: the comment does not give the default", key)
		}
		field := reflect.ValueOf(k.value(&def))
		value, ok := changedValue(field)
		if !ok {
			t.Logf("%s: a %s has no single env or flag value to check", key, field.Kind())
		}

		env := docEnv.FindStringSubmatch(comment)
		switch {
		case env == nil:
			t.Errorf("%s: the comment names no env var (Env: MESH_... or Env: none)", key)
		case env[1] != k.envName():
			t.Errorf("%s: the comment names env %s, but the key's is %s", key, env[1], k.envName())
		case ok:
			cfg := defaultFileConfig()
			getenv := func(k string) string {
				if k == env[1] {
					return value
				}
				return ""
			}
			if err := applyEnv(&cfg, getenv); err != nil {
				t.Errorf("%s: %s=%s: %v", key, env[1], value, err)
			} else if sameValue(reflect.ValueOf(k.value(&cfg)), field) {
				t.Errorf("%s: %s=%s does not set it", key, env[1], value)
			}
		}

		flag := docFlag.FindStringSubmatch(comment)
		switch {
		case flag == nil:
			t.Errorf("%s: the comment names no flag (Flag: --... or Flag: none)", key)
		case flag[1] != "--"+k.flagName():
			t.Errorf("%s: the comment names flag %s, but the key's is --%s", key, flag[1], k.flagName())
		default:
			f := newFlags()
			f.fs.SetOutput(io.Discard)
			if f.fs.Lookup(strings.TrimPrefix(flag[1], "--")) == nil {
				t.Errorf("%s: meshd has no flag %s", key, flag[1])
				continue
			}
			if !ok {
				continue
			}
			if err := f.fs.Parse([]string{flag[1] + "=" + value}); err != nil {
				t.Errorf("%s: %s=%s: %v", key, flag[1], value, err)
				continue
			}
			cfg := defaultFileConfig()
			f.applyFlags(&cfg)
			if sameValue(reflect.ValueOf(k.value(&cfg)), field) {
				t.Errorf("%s: %s=%s does not set it", key, flag[1], value)
			}
		}
	}
}

// keyComment returns the comment lines right above the line that sets key,
// without their "# ", joined by spaces.
func keyComment(lines []string, key string) string {
	set := regexp.MustCompile(`^` + regexp.QuoteMeta(key) + `\s*=`)
	for i, l := range lines {
		if !set.MatchString(l) {
			continue
		}
		start := i
		for start > 0 && strings.HasPrefix(lines[start-1], "#") {
			start--
		}
		var words []string
		for _, c := range lines[start:i] {
			words = append(words, strings.TrimSpace(strings.TrimPrefix(c, "#")))
		}
		return strings.Join(words, " ")
	}
	return ""
}

// changedValue returns a value, as text for an env var or a flag, that
// differs from the default v.
func changedValue(v reflect.Value) (string, bool) {
	switch v.Kind() {
	case reflect.String:
		return v.String() + "doc-test", true
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.String {
			return "tcp://192.0.2.1:7437", true
		}
	case reflect.Bool:
		return strconv.FormatBool(!v.Bool()), true
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(v.Int()+1, 10), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return strconv.FormatUint(v.Uint()+1, 10), true
	case reflect.Float32, reflect.Float64:
		return strconv.FormatFloat(v.Float()+1, 'g', -1, 64), true
	}
	return "", false
}
