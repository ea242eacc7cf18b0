package mailbox

import (
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Mirror files are named after their delivery time and their envelope:
// <root>/<YYYY-MM-DD>/inbox/<HHMMSS>-<tag>.txt, where the tag is the last
// 12 hex digits of the envelope id, and "-2", "-3", ... go before ".txt"
// when two files of one second share a tag. The functions here are the one
// place that spells it, for the mirror and for those who look for its files.

// tagLen is the length of a file's envelope tag.
const tagLen = 12

// Tag returns the envelope tag of id (a UUID in its text form): its last
// 12 hex digits, which are also the last group of the text form.
func Tag(id string) string {
	return id[max(0, len(id)-tagLen):]
}

// nameBase returns the name of the mirror file of envelope id delivered
// at t, less any collision suffix and the ".txt".
func nameBase(t time.Time, id string) string {
	b := make([]byte, 0, 6+1+tagLen)
	b = t.UTC().AppendFormat(b, "150405")
	b = append(b, '-')
	return string(append(b, Tag(id)...))
}

// numberedName returns the n-th name tried for a file: base+ext, then,
// from n = 2 on, base-n+ext.
func numberedName(base, ext string, n int) string {
	if n <= 1 {
		return base + ext
	}
	return base + "-" + strconv.Itoa(n) + ext
}

// TagOf returns the envelope tag of a mirror file name, and false for
// names that are not mirror files (the index, temporary files).
func TagOf(name string) (string, bool) {
	base, ok := strings.CutSuffix(name, ".txt")
	if !ok || len(base) < 6+1+tagLen || base[6] != '-' {
		return "", false
	}
	return base[7 : 7+tagLen], true
}

// InboxDir returns the inbox directory of day t (UTC) under root.
func InboxDir(root string, t time.Time) string {
	return filepath.Join(root, t.UTC().Format(time.DateOnly), "inbox")
}

// IsDay reports whether name looks like a day directory, YYYY-MM-DD.
func IsDay(name string) bool {
	_, err := time.Parse(time.DateOnly, name)
	return err == nil
}

// AttachmentDir returns the folder that holds the attachments of envelope
// id delivered at t (UTC), under root: <YYYY-MM-DD>/attachments/ and the
// name of the envelope's mirror file without ".txt" (<HHMMSS>-<id12>). It
// stays put when the message file moves from inbox/ to read/.
func AttachmentDir(root string, t time.Time, id string) string {
	return filepath.Join(root, t.UTC().Format(time.DateOnly), "attachments", nameBase(t, id))
}
