package history

import (
	"testing"

	"github.com/meshd/meshd/internal/testtmp"
)

// TestMain puts the tests' temporary directories on a memory file system
// when there is one (see internal/testtmp): the stores' fsyncs and the
// removal of their files wait on the disk otherwise.
func TestMain(m *testing.M) { testtmp.Main(m) }
