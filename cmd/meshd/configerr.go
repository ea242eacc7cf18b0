package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"
)

// decodeError turns the TOML decoder's error into one a user can act on:
// an unknown key names the key and its line; a value of the wrong type
// names the key, the line, the type wanted and an example, rather than
// the decoder's reflected Go types.
func decodeError(path string, src []byte, err error) error {
	var sm *toml.StrictMissingError
	if errors.As(err, &sm) && len(sm.Errors) > 0 {
		var msgs []string
		for _, e := range sm.Errors {
			row, _ := e.Position()
			msgs = append(msgs, fmt.Sprintf("unknown key %q at line %d", strings.Join(e.Key(), "."), row))
		}
		return fmt.Errorf("config %s: %s", path, strings.Join(msgs, "; "))
	}
	var de *toml.DecodeError
	if !errors.As(err, &de) {
		return fmt.Errorf("config %s: %w", path, err)
	}
	row, col := de.Position()
	msg := de.Error()
	if !strings.Contains(msg, "cannot decode TOML") && !strings.Contains(msg, "cannot store") {
		return fmt.Errorf("config %s: line %d column %d: %s", path, row, col, msg)
	}
	key := strings.Join(de.Key(), ".")
	if key == "" {
		key = keyAtLine(src, row)
	}
	got := "a value of another type"
	if i := strings.Index(msg, "cannot decode TOML "); i >= 0 {
		if f := strings.Fields(msg[i+len("cannot decode TOML "):]); len(f) > 0 {
			if g, ok := tomlTypes[f[0]]; ok {
				got = g
			}
		}
	}
	if v := valueAtLine(src, row); strings.HasPrefix(v, "[") && got != "a list" {
		// listen = [7437]: the decoder names the element's type.
		switch got {
		case "true or false":
			got = "a list of booleans"
		case "a value of another type":
			got = "a list of values of another type"
		default:
			got = "a list of " + strings.TrimPrefix(got, "a ") + "s"
		}
	}
	for i := range configKeys {
		if k := &configKeys[i]; k.key == key {
			want, example := k.wantType()
			return fmt.Errorf("config %s: line %d: %s is %s, want %s, like: %s", path, row, key, got, want, example)
		}
	}
	return fmt.Errorf("config %s: line %d: %s is %s of the wrong type", path, row, key, got)
}

// tomlTypes names the decoder's TOML types for a user.
var tomlTypes = map[string]string{
	"string": "a string", "integer": "a number", "float": "a decimal number", "boolean": "true or false",
	"array": "a list", "inline": "a table", "table": "a table", "datetime": "a date", "local": "a date",
}

// keyAtLine returns the key that line row (from 1) of a TOML file sets.
func keyAtLine(src []byte, row int) string {
	lines := strings.Split(string(src), "\n")
	if row < 1 || row > len(lines) {
		return ""
	}
	k, _, ok := strings.Cut(lines[row-1], "=")
	if !ok {
		return ""
	}
	return strings.Trim(strings.TrimSpace(k), `"'`)
}

// valueAtLine returns the value that line row (from 1) of a TOML file
// sets, as written.
func valueAtLine(src []byte, row int) string {
	lines := strings.Split(string(src), "\n")
	if row < 1 || row > len(lines) {
		return ""
	}
	_, v, _ := strings.Cut(lines[row-1], "=")
	return strings.TrimSpace(v)
}

// wantType names the TOML type of the key's value and gives a line that
// sets it.
func (k *configKey) wantType() (want, example string) {
	switch v := k.def.(type) {
	case []string:
		ex := "tcp://HOST:7437"
		if len(v) > 0 {
			ex = v[0]
		}
		return "a list of strings", fmt.Sprintf("%s = [%q]", k.key, ex)
	case bool:
		return "true or false", fmt.Sprintf("%s = true", k.key)
	case int:
		return "a whole number (no quotes)", fmt.Sprintf("%s = %d", k.key, v)
	case string:
		if _, err := time.ParseDuration(v); err == nil {
			return "a duration in quotes", fmt.Sprintf("%s = %q", k.key, v)
		}
		ex := v
		if ex == "" {
			ex = "..."
		}
		return "a string in quotes", fmt.Sprintf("%s = %s", k.key, strconv.Quote(ex))
	}
	return "another type", k.key + " = ..."
}
