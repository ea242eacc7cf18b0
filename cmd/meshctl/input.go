package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/meshd/meshd/channel"
	"github.com/meshd/meshd/proto"
)

// maxStdinText bounds a message body read from stdin: the protocol's
// [proto.MaxBodySize], the largest body a message may carry.
const maxStdinText = proto.MaxBodySize

// maxStdinJSON bounds the JSON text read from stdin for --params or
// --result. Indentation makes JSON text larger than its encoding, which
// must itself fit [proto.MaxBodySize].
const maxStdinJSON = 4 * proto.MaxBodySize

// readStdin reads all of stdin, refusing more than limit bytes. what names
// the input in errors.
func (a *app) readStdin(what string, limit int) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(a.Stdin, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("read %s from stdin: %w", what, err)
	}
	if len(b) > limit {
		return nil, withHint(fmt.Errorf("%s on stdin is larger than %d KiB", what, limit>>10),
			"a message carries at most %d KiB: share larger data another way and send where it is", proto.MaxBodySize>>10)
	}
	return b, nil
}

// textArg returns a message body: arg itself, or all of stdin when arg is
// "-". The body must be UTF-8 and at most [proto.MaxBodySize] bytes.
func (a *app) textArg(arg string) (string, error) {
	b := []byte(arg)
	if arg == "-" {
		var err error
		if b, err = a.readStdin("message", maxStdinText); err != nil {
			return "", err
		}
	}
	if len(b) > proto.MaxBodySize {
		return "", fmt.Errorf("message of %d bytes exceeds the %d KiB limit", len(b), proto.MaxBodySize>>10)
	}
	if !utf8.Valid(b) {
		return "", errors.New("message is not valid UTF-8 text")
	}
	return string(b), nil
}

// jsonFlag is a --params or --result flag: one JSON value, or "-" for
// stdin. set tells an empty value from an absent flag.
type jsonFlag struct {
	set bool
	val string
}

func (f *jsonFlag) String() string { return f.val }

func (f *jsonFlag) Set(s string) error {
	f.set, f.val = true, s
	return nil
}

// jsonValue returns the JSON value of flag --name in compact form, or nil
// when the flag is absent. It checks the value as meshd will (one JSON value, nesting and
// size limits of the protocol), so a mistake is reported before anything
// is sent: a malformed value is a usage error naming the flag.
func (a *app) jsonValue(name string, f *jsonFlag) (json.RawMessage, error) {
	if !f.set {
		return nil, nil
	}
	data := []byte(f.val)
	if f.val == "-" {
		var err error
		if data, err = a.readStdin(name+" JSON", maxStdinJSON); err != nil {
			return nil, err
		}
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, a.usageErrorf("--%s is empty: give one JSON value, such as {} or null", name)
	}
	enc, err := proto.JSONToCBOR(data)
	if err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, a.usageErrorf("--%s: %v (at byte %d)", name, err, se.Offset)
		}
		return nil, a.usageErrorf("--%s: %v", name, err)
	}
	if len(enc) > proto.MaxBodySize {
		return nil, fmt.Errorf("--%s: encoded size %d bytes exceeds the %d KiB limit", name, len(enc), proto.MaxBodySize>>10)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, data); err != nil {
		return nil, a.usageErrorf("--%s: invalid json: %v", name, err)
	}
	return buf.Bytes(), nil
}

// channelArg turns a channel name as typed ("#Deploys", "deploys") into
// the name meshd uses ("deploys"); a bad name is a usage error.
func (a *app) channelArg(s string) (string, error) {
	name, err := channel.NormalizeName(s)
	if err != nil {
		return "", a.usageErrorf("NAME: %v", err)
	}
	return name, nil
}

// peerArg checks a PEER argument: a key, fingerprint or roster name, not a
// channel.
func (a *app) peerArg(s string) (string, error) {
	switch {
	case strings.HasPrefix(s, "#"):
		return "", a.usageErrorf("PEER %q is a channel; send to a channel with 'meshctl send %s TEXT'", s, quoteShell(s))
	case strings.TrimSpace(strings.TrimPrefix(s, "@")) == "":
		return "", a.usageErrorf("PEER is empty")
	}
	return s, nil
}

// quoteShell quotes s for a command the user may paste into a shell.
func quoteShell(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-:@/") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
