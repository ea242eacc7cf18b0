package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

const usageVersion = `usage: meshctl version [--json]

Print meshctl's version (the module version, or devel and the commit it
was built from) and the Go version that built it. 'meshd version' prints
the daemon's.

examples:
  meshctl version
  meshctl version --json
`

// buildVersion is the module version, else "devel" and the VCS revision.
func buildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			return "devel-" + s.Value[:12]
		}
	}
	return "devel"
}

func runVersion(a *app, _ *noFlags, pos []string) error {
	if err := a.nargs(pos, 0, 0); err != nil {
		return err
	}
	v := struct {
		Version string `json:"version"`
		Go      string `json:"go"`
	}{buildVersion(), runtime.Version()}
	if a.json {
		return a.printJSON(v)
	}
	fmt.Fprintf(a.Stdout, "meshctl %s (%s)\n", v.Version, v.Go)
	return nil
}
