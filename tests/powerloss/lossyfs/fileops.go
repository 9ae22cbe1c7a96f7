package main

import (
	"sort"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// File and directory handles.  A file handle only counts opens (the data belongs to the
// inode); a directory handle holds the listing taken at OPENDIR, so READDIR's offsets stay
// stable while the directory changes.

type dirListing struct {
	entries []fuse.DirEntry
}

// handles maps FUSE file handles to directory listings (file handles carry nothing).
type handles struct {
	next     uint64
	listings map[uint64]*dirListing
}

func (fs *lossyFS) openFile(n *node, flags uint32, out *fuse.OpenOut) fuse.Status {
	if n.isDir {
		return fuse.Status(syscall.EISDIR)
	}
	if flags&syscall.O_TRUNC != 0 {
		if err := n.data.truncate(0); err != nil {
			return ioStatus(err)
		}
		n.mtime = time.Now()
	}
	n.opens++
	// Keep the page cache across opens: the kernel's cached pages are always current, since
	// every change goes through this mount.  No direct_io: shared writable mmap needs the
	// page cache.  No FLUSH at close: it would do nothing here (close is no sync) and costs
	// a round trip per close.
	out.OpenFlags = fuse.FOPEN_KEEP_CACHE | fuse.FOPEN_NOFLUSH
	return fuse.OK
}

func (fs *lossyFS) Open(_ <-chan struct{}, input *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	if status := fs.begin(); !status.Ok() {
		return status
	}
	defer fs.end()
	n, status := fs.node(input.NodeId)
	if !status.Ok() {
		return status
	}
	return fs.openFile(n, input.Flags, out)
}

func (fs *lossyFS) Create(_ <-chan struct{}, input *fuse.CreateIn, name string,
	out *fuse.CreateOut) fuse.Status {
	if status := fs.begin(); !status.Ok() {
		return status
	}
	defer fs.end()
	dir, status := fs.dir(input.NodeId)
	if !status.Ok() {
		return status
	}
	flags := input.Flags &^ syscall.O_TRUNC // a new file is empty
	file, errno := fs.t.create(dir, name, input.Mode, input.Uid, input.Gid)
	if errno == syscall.EEXIST && input.Flags&syscall.O_EXCL == 0 {
		file, errno = fs.t.lookup(dir, name) // raced with another create: open it
		flags = input.Flags
	}
	if errno != 0 {
		return errnoStatus(errno)
	}
	if status := fs.openFile(file, flags, &out.OpenOut); !status.Ok() {
		return status
	}
	fs.fillEntry(file, &out.EntryOut)
	return fuse.OK
}

func (fs *lossyFS) Release(_ <-chan struct{}, input *fuse.ReleaseIn) {
	fs.t.mu.Lock()
	defer fs.t.mu.Unlock()
	if n, ok := fs.t.nodes[input.NodeId]; ok && n.opens > 0 {
		n.opens--
		fs.t.retireIfUnreachable(n)
	}
}

// Flush is close(): it makes nothing durable.
func (fs *lossyFS) Flush(_ <-chan struct{}, _ *fuse.FlushIn) fuse.Status {
	return fuse.OK
}

func (fs *lossyFS) Read(_ <-chan struct{}, input *fuse.ReadIn, buf []byte) (fuse.ReadResult,
	fuse.Status) {
	if status := fs.begin(); !status.Ok() {
		return nil, status
	}
	defer fs.end()
	n, status := fs.node(input.NodeId)
	if !status.Ok() {
		return nil, status
	}
	filled, err := n.data.readAt(buf[:input.Size], int64(input.Offset))
	if err != nil {
		return nil, ioStatus(err)
	}
	return fuse.ReadResultData(buf[:filled]), fuse.OK
}

func (fs *lossyFS) Write(_ <-chan struct{}, input *fuse.WriteIn, data []byte) (uint32,
	fuse.Status) {
	if status := fs.begin(); !status.Ok() {
		return 0, status
	}
	defer fs.end()
	n, status := fs.node(input.NodeId)
	if !status.Ok() {
		return 0, status
	}
	if err := n.data.writeAt(data, int64(input.Offset)); err != nil {
		return 0, ioStatus(err)
	}
	n.mtime = time.Now()
	return uint32(len(data)), fuse.OK
}

// Fsync is fsync and fdatasync alike: the file's data and size become durable.
func (fs *lossyFS) Fsync(_ <-chan struct{}, input *fuse.FsyncIn) fuse.Status {
	if status := fs.begin(); !status.Ok() {
		return status
	}
	defer fs.end()
	n, status := fs.node(input.NodeId)
	if !status.Ok() {
		return status
	}
	return ioStatus(fs.t.syncFile(n))
}

func (fs *lossyFS) Fallocate(_ <-chan struct{}, input *fuse.FallocateIn) fuse.Status {
	if status := fs.begin(); !status.Ok() {
		return status
	}
	defer fs.end()
	n, status := fs.node(input.NodeId)
	if !status.Ok() {
		return status
	}
	switch input.Mode {
	case 0:
		if end := int64(input.Offset + input.Length); end > n.data.sizeBytes {
			if err := n.data.truncate(end); err != nil {
				return ioStatus(err)
			}
		}
		n.mtime = time.Now()
		return fuse.OK
	case fallocKeepSize:
		return fuse.OK // blocks are not modelled; the size does not change
	}
	return fuse.Status(syscall.EOPNOTSUPP)
}

func (fs *lossyFS) OpenDir(_ <-chan struct{}, input *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	if status := fs.begin(); !status.Ok() {
		return status
	}
	defer fs.end()
	dir, status := fs.dir(input.NodeId)
	if !status.Ok() {
		return status
	}
	listing := &dirListing{entries: []fuse.DirEntry{
		{Name: ".", Ino: dir.id, Mode: syscall.S_IFDIR},
		{Name: "..", Ino: rootID, Mode: syscall.S_IFDIR},
	}}
	names := make([]string, 0, len(dir.entries))
	for name := range dir.entries {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		child := dir.entries[name]
		mode := uint32(syscall.S_IFREG)
		if child.isDir {
			mode = syscall.S_IFDIR
		}
		listing.entries = append(listing.entries, fuse.DirEntry{Name: name, Ino: child.id, Mode: mode})
	}
	fs.handles.next++
	out.Fh = fs.handles.next
	fs.handles.listings[out.Fh] = listing
	return fuse.OK
}

func (fs *lossyFS) ReadDir(_ <-chan struct{}, input *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	if status := fs.begin(); !status.Ok() {
		return status
	}
	defer fs.end()
	listing, ok := fs.handles.listings[input.Fh]
	if !ok {
		return fuse.Status(syscall.EBADF)
	}
	for index := input.Offset; index < uint64(len(listing.entries)); index++ {
		entry := listing.entries[index]
		entry.Off = index + 1
		if !out.AddDirEntry(entry) {
			break
		}
	}
	return fuse.OK
}

func (fs *lossyFS) ReleaseDir(input *fuse.ReleaseIn) {
	fs.t.mu.Lock()
	defer fs.t.mu.Unlock()
	delete(fs.handles.listings, input.Fh)
}

// FsyncDir makes the directory's entries durable.
func (fs *lossyFS) FsyncDir(_ <-chan struct{}, input *fuse.FsyncIn) fuse.Status {
	if status := fs.begin(); !status.Ok() {
		return status
	}
	defer fs.end()
	dir, status := fs.dir(input.NodeId)
	if !status.Ok() {
		return status
	}
	return ioStatus(fs.t.syncDir(dir))
}
