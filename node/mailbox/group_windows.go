package mailbox

import "io/fs"

// groupOf reports no group: Windows files have none.
func groupOf(fs.FileInfo) (int, bool) { return 0, false }

// linkCount reports nothing: the file information Windows gives a
// directory listing has no link count.
func linkCount(fs.FileInfo) (uint64, bool) { return 0, false }
