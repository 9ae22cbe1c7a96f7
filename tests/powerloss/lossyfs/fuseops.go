package main

import (
	"log"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// cacheTimeout is how long the kernel may trust names and attributes: every change goes
// through this mount, so the kernel's caches cannot go stale.
const cacheTimeout = time.Second

// falloc modes: only plain allocation (posix_fallocate) and KEEP_SIZE are supported.
const fallocKeepSize = 1

// lossyFS serves the tree over FUSE.  Operations it does not implement answer ENOSYS.
type lossyFS struct {
	fuse.RawFileSystem
	t       *tree
	handles handles // guarded by t.mu
}

func newLossyFS(t *tree) *lossyFS {
	return &lossyFS{RawFileSystem: fuse.NewDefaultRawFileSystem(), t: t,
		handles: handles{listings: map[uint64]*dirListing{}}}
}

func (fs *lossyFS) String() string { return "lossyfs" }

// begin takes the tree's lock; it fails every request once the power is cut.
func (fs *lossyFS) begin() fuse.Status {
	fs.t.mu.Lock()
	if fs.t.dead {
		fs.t.mu.Unlock()
		return fuse.EIO
	}
	return fuse.OK
}

func (fs *lossyFS) end() { fs.t.mu.Unlock() }

func errnoStatus(errno syscall.Errno) fuse.Status { return fuse.Status(errno) }

func ioStatus(err error) fuse.Status {
	if err == nil {
		return fuse.OK
	}
	log.Printf("lossyfs: backing I/O failed: %v", err)
	return fuse.ToStatus(err)
}

func (fs *lossyFS) fillAttr(n *node, attr *fuse.Attr) {
	attr.Ino = n.id
	attr.Owner = fuse.Owner{Uid: n.uid, Gid: n.gid}
	attr.Blksize = pageSizeBytes
	seconds, nanos := uint64(n.mtime.Unix()), uint32(n.mtime.Nanosecond())
	attr.Atime, attr.Mtime, attr.Ctime = seconds, seconds, seconds
	attr.Atimensec, attr.Mtimensec, attr.Ctimensec = nanos, nanos, nanos
	if n.isDir {
		attr.Mode = syscall.S_IFDIR | n.mode
		attr.Nlink = 2
		attr.Size = pageSizeBytes
	} else {
		attr.Mode = syscall.S_IFREG | n.mode
		attr.Nlink = uint32(max(n.links, 0))
		attr.Size = uint64(n.data.sizeBytes)
	}
	attr.Blocks = (attr.Size + 511) / 512
}

func (fs *lossyFS) fillEntry(n *node, out *fuse.EntryOut) {
	out.NodeId = n.id
	out.SetEntryTimeout(cacheTimeout)
	out.SetAttrTimeout(cacheTimeout)
	fs.fillAttr(n, &out.Attr)
}

func (fs *lossyFS) node(id uint64) (*node, fuse.Status) {
	n, ok := fs.t.nodes[id]
	if !ok {
		return nil, fuse.Status(syscall.ESTALE)
	}
	return n, fuse.OK
}

func (fs *lossyFS) dir(id uint64) (*node, fuse.Status) {
	dir, errno := fs.t.dirNode(id)
	return dir, errnoStatus(errno)
}

func (fs *lossyFS) Lookup(_ <-chan struct{}, header *fuse.InHeader, name string,
	out *fuse.EntryOut) fuse.Status {
	if status := fs.begin(); !status.Ok() {
		return status
	}
	defer fs.end()
	dir, status := fs.dir(header.NodeId)
	if !status.Ok() {
		return status
	}
	child, errno := fs.t.lookup(dir, name)
	if errno != 0 {
		return errnoStatus(errno)
	}
	fs.fillEntry(child, out)
	return fuse.OK
}

func (fs *lossyFS) Forget(id, count uint64) {
	fs.t.mu.Lock()
	defer fs.t.mu.Unlock()
	fs.t.forget(id, count)
}

func (fs *lossyFS) GetAttr(_ <-chan struct{}, input *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	if status := fs.begin(); !status.Ok() {
		return status
	}
	defer fs.end()
	n, status := fs.node(input.NodeId)
	if !status.Ok() {
		return status
	}
	out.SetTimeout(cacheTimeout)
	fs.fillAttr(n, &out.Attr)
	return fuse.OK
}

func (fs *lossyFS) SetAttr(_ <-chan struct{}, input *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	if status := fs.begin(); !status.Ok() {
		return status
	}
	defer fs.end()
	n, status := fs.node(input.NodeId)
	if !status.Ok() {
		return status
	}
	if size, ok := input.GetSize(); ok {
		if n.isDir {
			return fuse.Status(syscall.EISDIR)
		}
		if err := n.data.truncate(int64(size)); err != nil {
			return ioStatus(err)
		}
		n.mtime = time.Now()
	}
	if mode, ok := input.GetMode(); ok {
		n.mode = mode & 0o7777
	}
	if uid, ok := input.GetUID(); ok {
		n.uid = uid
	}
	if gid, ok := input.GetGID(); ok {
		n.gid = gid
	}
	if mtime, ok := input.GetMTime(); ok {
		n.mtime = mtime
	}
	out.SetTimeout(cacheTimeout)
	fs.fillAttr(n, &out.Attr)
	return fuse.OK
}

func (fs *lossyFS) Mkdir(_ <-chan struct{}, input *fuse.MkdirIn, name string,
	out *fuse.EntryOut) fuse.Status {
	if status := fs.begin(); !status.Ok() {
		return status
	}
	defer fs.end()
	dir, status := fs.dir(input.NodeId)
	if !status.Ok() {
		return status
	}
	child, errno := fs.t.mkdir(dir, name, input.Mode, input.Uid, input.Gid)
	if errno != 0 {
		return errnoStatus(errno)
	}
	fs.fillEntry(child, out)
	return fuse.OK
}

func (fs *lossyFS) Unlink(_ <-chan struct{}, header *fuse.InHeader, name string) fuse.Status {
	if status := fs.begin(); !status.Ok() {
		return status
	}
	defer fs.end()
	dir, status := fs.dir(header.NodeId)
	if !status.Ok() {
		return status
	}
	return errnoStatus(fs.t.unlink(dir, name))
}

func (fs *lossyFS) Rmdir(_ <-chan struct{}, header *fuse.InHeader, name string) fuse.Status {
	if status := fs.begin(); !status.Ok() {
		return status
	}
	defer fs.end()
	dir, status := fs.dir(header.NodeId)
	if !status.Ok() {
		return status
	}
	return errnoStatus(fs.t.rmdir(dir, name))
}

func (fs *lossyFS) Rename(_ <-chan struct{}, input *fuse.RenameIn, oldName string,
	newName string) fuse.Status {
	if status := fs.begin(); !status.Ok() {
		return status
	}
	defer fs.end()
	oldDir, status := fs.dir(input.NodeId)
	if !status.Ok() {
		return status
	}
	newDir, status := fs.dir(input.Newdir)
	if !status.Ok() {
		return status
	}
	return errnoStatus(fs.t.rename(oldDir, oldName, newDir, newName, input.Flags))
}

func (fs *lossyFS) StatFs(_ <-chan struct{}, _ *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	var stat syscall.Statfs_t
	if err := syscall.Statfs(fs.t.backingRoot, &stat); err != nil {
		return ioStatus(err)
	}
	out.FromStatfsT(&stat)
	return fuse.OK
}
