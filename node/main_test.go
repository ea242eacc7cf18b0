package node

import (
	"os"
	"testing"

	"github.com/meshd/meshd/internal/testpar"
	"github.com/meshd/meshd/internal/testtmp"
)

// TestMain puts the tests' temporary directories on a memory file system
// when there is one (see internal/testtmp): the stores' fsyncs and the
// removal of their files wait on the disk otherwise. Most tests wait on
// links forming and on timers, not on the CPU, so more of them run at
// once than go test's default of one per CPU (see internal/testpar).
func TestMain(m *testing.M) {
	testpar.Default()
	testtmp.Use()
	os.Exit(m.Run())
}
