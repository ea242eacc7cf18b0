package history

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"os"
	"runtime/debug"
	"time"

	bolt "go.etcd.io/bbolt"
)

// A damaged store must end in a clear error, never in a panic or a fault.
// bbolt maps the file and trusts it: a page id beyond the end of a
// truncated file faults (SIGBUS, SIGSEGV), and a page of the wrong type
// panics, some of it in a goroutine of bbolt's own (the free page scan at
// open, which no recover can reach). So before bbolt sees a file,
// [CheckFile] reads it with pread, never mapped, and walks every page
// bbolt's open would touch: the meta pages, the freelist, and every
// bucket's B+tree, with the checks of bbolt's own free page scan and
// consistency check (page type, page ids within the high-water mark, no
// page reached twice, keys in order) and bounds on every element.

// bbolt's on-disk format, version 2 (go.etcd.io/bbolt internal/common),
// little-endian as written on the machines meshd runs on.
const (
	boltMagic          = 0xED0CDAED
	boltVersion        = 2
	boltPageHeaderSize = 16 // id(8) flags(2) count(2) overflow(4)
	boltElemSize       = 16 // branch: pos ksize pgid(8); leaf: flags pos ksize vsize
	boltMetaSize       = 64 // through the checksum at 56
	boltBranchPage     = 0x01
	boltLeafPage       = 0x02
	boltMetaPage       = 0x04
	boltFreelistPage   = 0x10
	boltBucketLeaf     = 0x01
	boltBucketHeader   = 16 // root pgid(8) sequence(8)
	boltNoFreelist     = ^uint64(0)
	// boltMaxDepth bounds the walk: a B+tree of 4 KiB pages is a handful
	// of levels deep even at the file size limit.
	boltMaxDepth = 64
)

// DamageError says what is wrong with a store file. It matches
// [ErrCorrupt] with errors.Is, and [ErrNewerFormat] when the file is
// whole but from a newer format.
type DamageError struct {
	Path   string
	Reason string
	// Newer: the file is not damaged but written by a newer build.
	Newer bool
}

func (e *DamageError) Error() string {
	if e.Newer {
		return fmt.Sprintf("%s: history store %s: %s", ErrNewerFormat, e.Path, e.Reason)
	}
	return fmt.Sprintf("%s: %s: %s", ErrCorrupt, e.Path, e.Reason)
}

// Is matches [ErrCorrupt], and [ErrNewerFormat] for a newer file.
func (e *DamageError) Is(target error) bool {
	return target == ErrCorrupt || (e.Newer && target == ErrNewerFormat)
}

// CheckReport is what [CheckFile] found in a file it accepted.
type CheckReport struct {
	Size     int64
	PageSize int
	// Pages is the high-water mark: the pages in use or free.
	Pages uint64
	// Walked is how many pages the walk read.
	Walked uint64
	Took   time.Duration
}

// CheckFile checks the structure of the store file at path without
// mapping it, so that no damage can fault or panic (see the comment at
// the top of this file). A damaged file fails with a [*DamageError]. It
// does not take the file's lock; [Open] does before it calls it.
func CheckFile(path string) (CheckReport, error) {
	f, err := os.Open(path)
	if err != nil {
		return CheckReport{}, fmt.Errorf("check history store: %w", err)
	}
	defer f.Close()
	return checkFile(f, path)
}

func checkFile(f *os.File, path string) (CheckReport, error) {
	start := time.Now()
	fi, err := f.Stat()
	if err != nil {
		return CheckReport{}, fmt.Errorf("check history store: %w", err)
	}
	c := &checker{f: f, path: path, size: fi.Size()}
	rep := CheckReport{Size: c.size}
	if err := c.check(); err != nil {
		return rep, err
	}
	rep.PageSize, rep.Pages, rep.Walked, rep.Took = c.pageSize, c.hwm, c.walked, time.Since(start)
	return rep, nil
}

// checker walks one file.
type checker struct {
	f        *os.File
	path     string
	size     int64
	pageSize int
	hwm      uint64
	seen     []uint64 // bitmap of the pages reached
	walked   uint64
	buf      []byte
}

func (c *checker) damaged(format string, args ...any) error {
	return &DamageError{Path: c.path, Reason: fmt.Sprintf(format, args...)}
}

// boltMeta is the part of a meta page the check uses.
type boltMeta struct {
	magic, version, pageSize uint32
	root, freelist, pgid     uint64
	txid                     uint64
	sumOK                    bool
}

func parseMeta(page []byte) boltMeta {
	b := page[boltPageHeaderSize:]
	m := boltMeta{
		magic:    binary.LittleEndian.Uint32(b[0:]),
		version:  binary.LittleEndian.Uint32(b[4:]),
		pageSize: binary.LittleEndian.Uint32(b[8:]),
		root:     binary.LittleEndian.Uint64(b[16:]),
		freelist: binary.LittleEndian.Uint64(b[32:]),
		pgid:     binary.LittleEndian.Uint64(b[40:]),
		txid:     binary.LittleEndian.Uint64(b[48:]),
	}
	h := fnv.New64a()
	h.Write(b[:56])
	m.sumOK = h.Sum64() == binary.LittleEndian.Uint64(b[56:])
	return m
}

func (m boltMeta) valid() bool { return m.magic == boltMagic && m.version == boltVersion && m.sumOK }

// newer reports a meta page that is whole but of another format version.
func (m boltMeta) newer() bool { return m.magic == boltMagic && m.version > boltVersion && m.sumOK }

// readAt reads n bytes at off; a file that ends first is damage.
func (c *checker) readAt(n int, off int64) ([]byte, error) {
	if off < 0 || off+int64(n) > c.size {
		return nil, c.damaged("the file ends at byte %d, before byte %d that it needs: it was cut short", c.size, off+int64(n))
	}
	if cap(c.buf) < n {
		c.buf = make([]byte, n)
	}
	b := c.buf[:n]
	if _, err := c.f.ReadAt(b, off); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, c.damaged("the file ends before byte %d: it was cut short", off+int64(n))
		}
		return nil, fmt.Errorf("check history store %s: %w", c.path, err)
	}
	return b, nil
}

// candidatePageSizes are the page sizes bbolt may have written with.
var candidatePageSizes = []int{4096, 8192, 16384, 32768, 65536, 1024, 2048}

func (c *checker) check() error {
	if c.size == 0 {
		return c.damaged("the file is empty, but a store is never created empty: it was truncated (a full disk, a crash of the file system, or a copy cut short)")
	}
	if c.size < 2*boltPageHeaderSize+2*boltMetaSize {
		return c.damaged("the file is %d bytes, too short to hold a store's header: it was truncated", c.size)
	}
	head, err := c.readAt(boltPageHeaderSize+boltMetaSize, 0)
	if err != nil {
		return err
	}
	m0 := parseMeta(head)
	var metas []boltMeta
	var pageSizes []int
	if m0.valid() || m0.newer() {
		pageSizes = []int{int(m0.pageSize)}
	} else {
		pageSizes = candidatePageSizes
	}
	for _, ps := range pageSizes {
		if ps < 1024 || ps > 1<<16 || ps&(ps-1) != 0 {
			return c.damaged("meta page 0 gives a page size of %d", ps)
		}
		b, err := c.readAt(boltPageHeaderSize+boltMetaSize, int64(ps))
		if err != nil {
			if len(pageSizes) == 1 {
				return c.damaged("the file is %d bytes, cut short inside its header (the second meta page at byte %d)", c.size, ps)
			}
			continue
		}
		m1 := parseMeta(b)
		if m1.valid() || m1.newer() || len(pageSizes) == 1 {
			c.pageSize = ps
			metas = []boltMeta{m0, m1}
			break
		}
	}
	if metas == nil {
		if m0.magic != boltMagic {
			return c.damaged("no valid meta page: this is not a history store, or its first pages were overwritten")
		}
		return c.damaged("meta page 1 is unreadable and meta page 0 does not check out")
	}
	// bbolt uses the meta page of the higher transaction id if it checks
	// out, else the other one.
	a, b := metas[0], metas[1]
	if b.txid > a.txid {
		a, b = b, a
	}
	m := a
	if !a.valid() {
		m = b
	}
	if !m.valid() {
		if a.newer() || b.newer() {
			v := max(a.version, b.version)
			return &DamageError{Path: c.path, Newer: true,
				Reason: fmt.Sprintf("its file format is version %d; this build reads version %d", v, boltVersion)}
		}
		return c.damaged("both meta pages fail their checksum or magic: the header was overwritten")
	}
	if int(m.pageSize) != c.pageSize {
		return c.damaged("meta pages disagree on the page size (%d and %d)", m.pageSize, c.pageSize)
	}
	c.hwm = m.pgid
	if c.hwm < 4 {
		return c.damaged("high-water mark of %d pages: a store has at least 4", c.hwm)
	}
	if need := int64(c.hwm) * int64(c.pageSize); need > c.size || need < 0 {
		return c.damaged("the file is %d bytes but its pages reach to byte %d: it was cut short (a full disk, or a crash of the file system)", c.size, need)
	}
	c.seen = make([]uint64, (c.hwm+63)/64)
	c.mark(0)
	c.mark(1)
	if m.freelist != boltNoFreelist {
		if err := c.checkFreelist(m.freelist); err != nil {
			return err
		}
	}
	return c.walkTree(m.root, nil, nil, 0, "root bucket")
}

func (c *checker) mark(id uint64) bool {
	w, bit := id/64, uint64(1)<<(id%64)
	if c.seen[w]&bit != 0 {
		return false
	}
	c.seen[w] |= bit
	return true
}

// page reads page id and its overflow pages, checking the header.
func (c *checker) page(id uint64, where string) ([]byte, uint16, error) {
	if id < 2 || id >= c.hwm {
		return nil, 0, c.damaged("%s points to page %d, outside the pages in use (2 to %d)", where, id, c.hwm-1)
	}
	b, err := c.readAt(c.pageSize, int64(id)*int64(c.pageSize))
	if err != nil {
		return nil, 0, err
	}
	if got := binary.LittleEndian.Uint64(b); got != id {
		return nil, 0, c.damaged("page %d (%s) says it is page %d: it was overwritten", id, where, got)
	}
	flags := binary.LittleEndian.Uint16(b[8:])
	overflow := uint64(binary.LittleEndian.Uint32(b[12:]))
	if id+overflow >= c.hwm {
		return nil, 0, c.damaged("page %d (%s) runs over %d more pages, past the pages in use", id, where, overflow)
	}
	for i := uint64(0); i <= overflow; i++ {
		if !c.mark(id + i) {
			return nil, 0, c.damaged("page %d is reached twice (the second time from %s)", id+i, where)
		}
	}
	c.walked += overflow + 1
	if overflow > 0 {
		if b, err = c.readAt(int(overflow+1)*c.pageSize, int64(id)*int64(c.pageSize)); err != nil {
			return nil, 0, err
		}
	}
	// The buffer is reused by the next read: the caller gets a copy.
	return bytes.Clone(b), flags, nil
}

func (c *checker) checkFreelist(id uint64) error {
	b, flags, err := c.page(id, "the freelist")
	if err != nil {
		return err
	}
	if flags != boltFreelistPage {
		return c.damaged("page %d should be the freelist but has type %#x", id, flags)
	}
	n := uint64(binary.LittleEndian.Uint16(b[10:]))
	off := uint64(boltPageHeaderSize)
	if n == 0xFFFF { // the count is in the first element
		if len(b) < boltPageHeaderSize+8 {
			return c.damaged("freelist page %d is cut short", id)
		}
		n = binary.LittleEndian.Uint64(b[boltPageHeaderSize:])
		off += 8
	}
	if n > (uint64(len(b))-off)/8 {
		return c.damaged("freelist page %d claims %d free pages, more than it holds", id, n)
	}
	return nil
}

// walkTree walks the B+tree whose root is page id, checking that its
// keys lie in [lo, hi) (nil: unbounded) and in order.
func (c *checker) walkTree(id uint64, lo, hi []byte, depth int, where string) error {
	if depth > boltMaxDepth {
		return c.damaged("the tree under %s is more than %d levels deep", where, boltMaxDepth)
	}
	b, flags, err := c.page(id, where)
	if err != nil {
		return err
	}
	switch flags {
	case boltBranchPage, boltLeafPage:
	default:
		return c.damaged("page %d (%s) has type %#x, not a branch or leaf page", id, where, flags)
	}
	return c.walkNode(id, b, flags, lo, hi, depth, where)
}

// walkNode checks the elements of the node page b (page id; id 0 for an
// inline bucket's page).
func (c *checker) walkNode(id uint64, b []byte, flags uint16, lo, hi []byte, depth int, where string) error {
	count := int(binary.LittleEndian.Uint16(b[10:]))
	if boltPageHeaderSize+count*boltElemSize > len(b) {
		return c.damaged("page %d (%s) claims %d elements, more than it holds", id, where, count)
	}
	if count == 0 && flags == boltBranchPage {
		return c.damaged("branch page %d (%s) is empty", id, where)
	}
	prev := lo
	for i := range count {
		e := boltPageHeaderSize + i*boltElemSize
		pos := int(binary.LittleEndian.Uint32(b[e+4*boolInt(flags == boltLeafPage):]))
		ksize := int(binary.LittleEndian.Uint32(b[e+4+4*boolInt(flags == boltLeafPage):]))
		vsize := 0
		if flags == boltLeafPage {
			vsize = int(binary.LittleEndian.Uint32(b[e+12:]))
		}
		start := e + pos
		if pos < 0 || ksize < 0 || vsize < 0 || start < e || start+ksize+vsize > len(b) || start+ksize+vsize < start {
			return c.damaged("page %d (%s) element %d lies outside the page", id, where, i)
		}
		key := b[start : start+ksize]
		if i > 0 && bytes.Compare(prev, key) >= 0 {
			return c.damaged("page %d (%s): keys out of order at element %d", id, where, i)
		}
		if i == 0 && prev != nil && bytes.Compare(prev, key) > 0 {
			return c.damaged("page %d (%s): first key below its parent's", id, where)
		}
		if hi != nil && bytes.Compare(key, hi) >= 0 {
			return c.damaged("page %d (%s): key %d above the next key of its parent", id, where, i)
		}
		if flags == boltBranchPage {
			child := binary.LittleEndian.Uint64(b[e+8:])
			next := hi
			if i+1 < count {
				ne := boltPageHeaderSize + (i+1)*boltElemSize
				npos := int(binary.LittleEndian.Uint32(b[ne:]))
				nk := int(binary.LittleEndian.Uint32(b[ne+4:]))
				if ne+npos < ne || ne+npos+nk > len(b) {
					return c.damaged("page %d (%s) element %d lies outside the page", id, where, i+1)
				}
				next = b[ne+npos : ne+npos+nk]
			}
			if err := c.walkTree(child, key, next, depth+1, where); err != nil {
				return err
			}
			prev = key
			continue
		}
		prev = key
		if binary.LittleEndian.Uint32(b[e:])&boltBucketLeaf == 0 {
			continue
		}
		val := b[start+ksize : start+ksize+vsize]
		name := fmt.Sprintf("bucket %q", key)
		if len(val) < boltBucketHeader {
			return c.damaged("page %d (%s): the header of %s is cut short", id, where, name)
		}
		if root := binary.LittleEndian.Uint64(val); root != 0 {
			if err := c.walkTree(root, nil, nil, depth+1, name); err != nil {
				return err
			}
			continue
		}
		inline := val[boltBucketHeader:]
		if len(inline) < boltPageHeaderSize {
			return c.damaged("page %d (%s): the inline page of %s is cut short", id, where, name)
		}
		if f := binary.LittleEndian.Uint16(inline[8:]); f != boltLeafPage {
			return c.damaged("page %d (%s): the inline page of %s has type %#x", id, where, name, f)
		}
		if err := c.walkNode(0, inline, boltLeafPage, nil, nil, depth+1, name); err != nil {
			return err
		}
	}
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// createFile makes a new, empty store at path: bbolt writes its header
// into path+".new", which is synced and renamed into place, so path never
// names a file without a header.
func createFile(path string, cfg Config) error {
	tmp := path + ".new"
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("create history store: remove stale %s: %w", tmp, err)
	}
	db, err := bolt.Open(tmp, 0o600, &bolt.Options{Timeout: cfg.LockTimeout, NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
	if err != nil {
		return fmt.Errorf("create history store %s: %w", tmp, err)
	}
	if err := db.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("create history store %s: %w", tmp, err)
	}
	// A link never replaces a store another opener made first.
	err = os.Link(tmp, path)
	switch {
	case errors.Is(err, fs.ErrExist):
		os.Remove(tmp)
		return nil // use theirs
	case err != nil:
		// A file system without hard links: rename (the caller holds the
		// home's lock, so no other opener races it).
		if err := os.Rename(tmp, path); err != nil {
			os.Remove(tmp)
			return fmt.Errorf("create history store %s: %w", path, err)
		}
	default:
		if err := os.Remove(tmp); err != nil {
			return fmt.Errorf("create history store: %w", err)
		}
	}
	return syncDirOf(path)
}

// checkLocked runs [CheckFile] on path under a shared lock, so a store
// that another process holds open (and may be writing) is reported as
// locked after timeout, not read half-written.
func checkLocked(path string, timeout time.Duration) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open history store: %w", err)
	}
	defer f.Close()
	deadline := time.Now().Add(timeout)
	for {
		err := lockShared(f)
		if err == nil {
			break
		}
		if !lockBusy(err) {
			return fmt.Errorf("lock history store %s: %w", path, err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("history store %s is %w (gave up after %v)", path, ErrLocked, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Unlock before the deferred Close: a child process forked by another
	// goroutine shares f until it execs, and Close alone would leave the
	// shared lock held that long, failing bbolt's exclusive lock next.
	defer unlockShared(f)
	_, err = checkFile(f, path)
	return err
}

// openBolt is bolt.Open with bbolt's panics and memory faults on a file
// that changed under the check turned into an error wrapping [ErrCorrupt].
// (bbolt's free page scan runs in a goroutine of its own, out of recover's
// reach: [CheckFile] has covered what it checks.)
func openBolt(path string, opts *bolt.Options) (db *bolt.DB, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			db, err = nil, &DamageError{Path: path, Reason: fmt.Sprintf("the store failed to open: %v", r)}
		}
	}()
	return bolt.Open(path, 0o600, opts)
}
