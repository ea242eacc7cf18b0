package mailbox

// openNoFollowNoBlock is empty: Windows has no FIFOs in a folder, and the
// Lstat before the open and the fstat after it refuse a link.
const openNoFollowNoBlock = 0
