package main

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/meshd/meshd/proto"
)

// mailVerifyAttachment is what verify found of one attachment a mailbox
// file lists: "verified" (the file beside it matches the signed size and
// SHA-256), "absent" (not fetched yet) or "mismatch".
type mailVerifyAttachment struct {
	Name  string `json:"name"`
	State string `json:"state"`
	Path  string `json:"path,omitempty"`
}

// verifyAttachments checks the files beside mailbox file file, in
// <day>/attachments/<file's name without .txt>/, against the signed
// attachment list of se. It returns an error for a file that does not
// match; an attachment not fetched yet is reported, not an error.
func verifyAttachments(file string, as []proto.Attachment) ([]mailVerifyAttachment, error) {
	if len(as) == 0 || file == "-" {
		return nil, nil
	}
	dir := filepath.Join(filepath.Dir(filepath.Dir(file)), "attachments", strings.TrimSuffix(filepath.Base(file), ".txt"))
	var out []mailVerifyAttachment
	var bad error
	for _, a := range as {
		p := filepath.Join(dir, a.Name)
		x := mailVerifyAttachment{Name: a.Name, State: "verified", Path: p}
		switch err := checkFileHash(p, a); {
		case errors.Is(err, fs.ErrNotExist):
			x.State, x.Path = "absent", ""
		case err != nil:
			x.State = "mismatch"
			if bad == nil {
				bad = fmt.Errorf("attachment %s: %w", p, err)
			}
		}
		out = append(out, x)
	}
	return out, bad
}

func checkFileHash(p string, a proto.Attachment) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return err
	}
	if uint64(n) != a.Size {
		return fmt.Errorf("%d bytes, the signed size is %d", n, a.Size)
	}
	if [32]byte(h.Sum(nil)) != a.SHA256 {
		return fmt.Errorf("content does not match its signed SHA-256 %s", a.SHA256)
	}
	return nil
}

// describeAttachments adds the attachments' states to an "ok" line.
func describeAttachments(xs []mailVerifyAttachment) string {
	if len(xs) == 0 {
		return ""
	}
	var parts []string
	for _, x := range xs {
		parts = append(parts, fmt.Sprintf("%s %s", printable(x.Name, false), x.State))
	}
	return "; attachments: " + strings.Join(parts, ", ")
}
