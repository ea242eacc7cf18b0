package mailbox

import "io/fs"

// linkCount reports nothing: the file information Windows gives a
// directory listing has no link count.
func linkCount(fs.FileInfo) (uint64, bool) { return 0, false }
