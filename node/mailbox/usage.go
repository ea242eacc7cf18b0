package mailbox

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// Usage counts the mirror files under root (<day>/inbox/*.txt, and in
// read/ and sent/) and their bytes. Temporary files, indexes and the
// outbox are not counted. It reads each folder once; a folder that vanishes meanwhile counts
// as empty.
func Usage(root string) (files int, bytes int64, err error) {
	days, err := os.ReadDir(root)
	if err != nil {
		return 0, 0, err
	}
	for _, d := range days {
		if !d.IsDir() || !IsDay(d.Name()) {
			continue
		}
		for _, f := range Folders {
			k, b, err := usageOf(filepath.Join(root, d.Name(), f))
			files, bytes = files+k, bytes+b
			if err != nil {
				return files, bytes, err
			}
		}
	}
	return files, bytes, nil
}

// usageOf counts the mirror files of one folder.
func usageOf(dir string) (files int, bytes int64, err error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return 0, 0, nil
		}
		return 0, 0, err
	}
	for _, e := range ents {
		if _, ok := TagOf(e.Name()); !ok || !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		files++
		bytes += info.Size()
	}
	return files, bytes, nil
}

// RemoveFile removes the mirror file at path, which must be a mirror
// file's name in a day's inbox, read or sent folder under root, and
// returns its size.
// A file already gone is not an error: it returns 0.
func RemoveFile(root, path string) (int64, error) {
	rel, err := filepath.Rel(root, path)
	if err != nil {
		return 0, err
	}
	day, rest, _ := cutDir(rel)
	folder, name, _ := cutDir(rest)
	if _, ok := TagOf(name); !ok || !IsDay(day) || !slices.Contains(Folders, folder) || filepath.Base(rel) != name {
		return 0, errors.New("mailbox: not a mirror file: " + path)
	}
	info, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if !info.Mode().IsRegular() {
		return 0, errors.New("mailbox: not a regular file: " + path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, err
	}
	return info.Size(), nil
}

// cutDir splits a relative path at its first separator.
func cutDir(p string) (first, rest string, ok bool) {
	for i := 0; i < len(p); i++ {
		if os.IsPathSeparator(p[i]) {
			return p[:i], p[i+1:], true
		}
	}
	return p, "", false
}
