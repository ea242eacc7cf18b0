package mailbox

import "io/fs"

// groupOf reports no group: Windows files have none.
func groupOf(fs.FileInfo) (int, bool) { return 0, false }
