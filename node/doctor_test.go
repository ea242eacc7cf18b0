package node

import "testing"

// TestDoctorDiskNearlyFull: below both thresholds (256 MiB and 2 % free)
// the disk check is a problem with its fix; above either, it is fine.
func TestDoctorDiskNearlyFull(t *testing.T) {
	m := newTestMesh(t, 1)
	m.writeRoster(0, m.roster)
	n := m.start(0)
	old := diskSpace
	t.Cleanup(func() { diskSpace = old })
	check := func() (string, string) {
		for _, c := range n.Doctor().Checks {
			if c.Name == "disk" {
				return c.Status, c.Fix
			}
		}
		t.Fatal("no disk check")
		return "", ""
	}
	diskSpace = func(string) (uint64, uint64, error) { return 100 << 20, 100 << 30, nil }
	if st, fix := check(); st != "problem" || fix == "" {
		t.Fatalf("100 MiB free of 100 GiB: %s %q", st, fix)
	}
	diskSpace = func(string) (uint64, uint64, error) { return 100 << 20, 1 << 30, nil }
	if st, _ := check(); st != "ok" {
		t.Fatalf("100 MiB free of 1 GiB (10 %%): %s", st)
	}
	diskSpace = old
	if st, _ := check(); st == "warn" {
		t.Fatal("the real disk's free space could not be measured")
	}
}
