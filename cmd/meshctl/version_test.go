package main

import (
	"encoding/json"
	"os/exec"
	"runtime"
	"strings"
	"testing"
)

// TestVersion runs the real binary: version prints the build's version
// and Go's, in text and JSON.
func TestVersion(t *testing.T) {
	t.Parallel()
	bin := buildMeshctl(t)
	out, err := exec.Command(bin, "version").Output()
	if err != nil || !strings.HasPrefix(string(out), "meshctl ") || !strings.Contains(string(out), runtime.Version()) {
		t.Fatalf("version: %v: %q", err, out)
	}
	out, err = exec.Command(bin, "version", "--json").Output()
	var v struct{ Version, Go string }
	if err != nil || json.Unmarshal(out, &v) != nil || v.Version == "" || v.Go != runtime.Version() {
		t.Fatalf("version --json: %v: %q", err, out)
	}
	if r := mc(t, "version", "extra"); r.code != exitUsage {
		t.Fatalf("version extra: exit %d", r.code)
	}
}
