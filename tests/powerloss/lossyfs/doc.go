// Command lossyfs is a FUSE file system that loses, at a power cut, exactly what a disk with
// a volatile write cache may lose: every change not yet made durable with fsync.  It is
// mqstore's own stand-in for LazyFS, built only from the Go module proxy.
//
//	lossyfs -backing DIR -staging DIR -mount DIR
//
// It mirrors the backing directory at the mount point.  Whatever the backing directory holds
// is "durable"; every change made through the mount is first "volatile", held in the daemon's
// memory, and reaches the backing directory only the way it would reach a real disk:
//
// File data and size.  WRITE (also the kernel writing back dirty pages of a shared writable
// mmap), truncate/ftruncate (SETATTR size) and fallocate change a volatile overlay of the
// file, in 4 KiB pages.  FSYNC of the file (fsync, fdatasync, msync(MS_SYNC): the kernel
// writes the dirty mmap pages back as WRITEs first) applies the overlay and the size to the
// inode's backing file and fsyncs it.  FLUSH (close) and RELEASE make nothing durable: on
// Linux close() is not a sync.  fdatasync and fsync are the same here.
//
// Namespace.  create, mkdir, rename, unlink and rmdir change only the volatile tree.  FSYNCDIR
// of a directory (fsync of a directory descriptor) makes that directory's current entries
// durable: every name it holds now is linked in the backing directory to the entry's inode,
// every name it no longer holds is removed there.  Nothing else makes a name durable, so
//   - a file created and fsynced, in a directory never fsynced, is gone after a power cut;
//   - a file whose name was made durable but whose data was never fsynced comes back with
//     its last durable size and contents (0 bytes if it never had any);
//   - a rename is undone unless the destination directory was fsynced; if only the
//     destination was, a file comes back under both names (a hard link), like a rename whose
//     removal half was lost; if only the source was, it comes back under neither.
//
// Inodes are real inodes of the backing file system: a regular file's durable data lives in
// one backing file, hard-linked at each of its durable names and, while the daemon runs, at
// <staging>/f<id>, so that data synced before the file has a durable name is kept until it
// gets one.  A directory's durable entries live in a real backing directory; a directory
// synced before it has a durable name of its own waits at <staging>/d<id>.
//
// Power cut.  SIGUSR1 or SIGTERM (there is no clean unmount: stopping is a power cut).  The
// daemon fails every further request with EIO, drops every volatile change, deletes the
// staging directory (inodes without a durable name are lost, as a real file system frees
// orphans), aborts the FUSE connection through fusectl (/sys/fs/fuse/connections/<id>/abort;
// fusectl is mounted privately for that if it is not mounted), which makes the kernel fail
// every request still waiting and keeps the kernel's own dirty pages from ever reaching the
// daemon, unmounts lazily (fusermount3 -u -z), prints "power cut" and exits 0.  The backing
// directory then holds exactly what survived, and a new daemon mounts it afresh.
//
// Stricter than ext4, on purpose (it finds more bugs): ext4 commits all earlier metadata
// changes with any later fsync (one journal), and a delayed-allocation file renamed over
// another is flushed at the rename; lossyfs makes a name durable only by an fsync of its own
// directory, and the data only by an fsync of the file.
//
// Other deviations from a real disk: writes are never torn within a file sync (a synced file
// is applied whole, page-granular tearing is not modelled); nothing volatile ever reaches the
// disk on its own (a real cache writes back dirty data at any time, so a real disk may keep
// more, never less); a directory renamed to another parent moves its durable contents when the
// destination is synced (its old durable name goes at once); a removed durable directory
// takes its durable subtree with it; times, modes and owners are volatile attributes that are
// not persisted; hard links, symlinks, device nodes, extended attributes and RENAME_EXCHANGE
// are refused; POSIX locks are the kernel's own (local to this machine).  Data goes through
// the kernel page cache (no direct_io), so shared writable mmap works.
package main
