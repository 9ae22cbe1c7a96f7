package main

import (
	"syscall"
	"time"
)

// The volatile namespace: every change here is lost at a power cut unless an fsync of the
// directory holding the name (syncDir) made it durable first.  Callers hold t.mu.

// renameNoReplace and renameExchange are renameat2's flags.
const (
	renameNoReplace = 1
	renameExchange  = 2
)

func (t *tree) dirNode(id uint64) (*node, syscall.Errno) {
	dir, ok := t.nodes[id]
	switch {
	case !ok:
		return nil, syscall.ESTALE
	case !dir.isDir:
		return nil, syscall.ENOTDIR
	}
	return dir, 0
}

func (t *tree) lookup(dir *node, name string) (*node, syscall.Errno) {
	child, ok := dir.entries[name]
	if !ok {
		return nil, syscall.ENOENT
	}
	child.lookups++
	return child, 0
}

// attach gives a new node its name (the caller checked the name is free).
func (t *tree) attach(dir *node, name string, child *node) {
	dir.entries[name] = child
	if child.isDir {
		child.parent = dir
	} else {
		child.links++
	}
	dir.mtime = time.Now()
}

func (t *tree) create(dir *node, name string, mode, uid, gid uint32) (*node, syscall.Errno) {
	if _, exists := dir.entries[name]; exists {
		return nil, syscall.EEXIST
	}
	file := t.newFile(mode&0o7777, uid, gid)
	t.attach(dir, name, file)
	file.lookups++
	return file, 0
}

func (t *tree) mkdir(dir *node, name string, mode, uid, gid uint32) (*node, syscall.Errno) {
	if _, exists := dir.entries[name]; exists {
		return nil, syscall.EEXIST
	}
	child := t.newDir(mode&0o7777, uid, gid)
	t.attach(dir, name, child)
	child.lookups++
	return child, 0
}

// detach removes a name; a file whose last name goes keeps its data while it is open.
func (t *tree) detach(dir *node, name string) {
	child := dir.entries[name]
	delete(dir.entries, name)
	if child.isDir {
		child.parent = nil
	} else {
		child.links--
		t.retireIfUnreachable(child)
	}
	dir.mtime = time.Now()
}

// retireIfUnreachable drops the volatile data of a file no name, descriptor or kernel
// reference can reach any more: nothing can sync it.
func (t *tree) retireIfUnreachable(file *node) {
	if !file.isDir && file.links == 0 && file.opens == 0 && file.lookups == 0 {
		file.data.dropVolatile()
	}
}

func (t *tree) unlink(dir *node, name string) syscall.Errno {
	child, ok := dir.entries[name]
	switch {
	case !ok:
		return syscall.ENOENT
	case child.isDir:
		return syscall.EISDIR
	}
	t.detach(dir, name)
	return 0
}

func (t *tree) rmdir(dir *node, name string) syscall.Errno {
	child, ok := dir.entries[name]
	switch {
	case !ok:
		return syscall.ENOENT
	case !child.isDir:
		return syscall.ENOTDIR
	case len(child.entries) > 0:
		return syscall.ENOTEMPTY
	}
	t.detach(dir, name)
	return 0
}

func (t *tree) rename(oldDir *node, oldName string, newDir *node, newName string,
	flags uint32) syscall.Errno {
	moving, ok := oldDir.entries[oldName]
	if !ok {
		return syscall.ENOENT
	}
	if flags&renameExchange != 0 {
		return syscall.EINVAL
	}
	if moving.isDir {
		for ancestor := newDir; ancestor != nil; ancestor = ancestor.parent {
			if ancestor == moving {
				return syscall.EINVAL // into its own subtree
			}
		}
	}
	if target, exists := newDir.entries[newName]; exists {
		if errno := checkReplace(moving, target, flags); errno != 0 || target == moving {
			return errno
		}
		t.detach(newDir, newName)
	}
	delete(oldDir.entries, oldName)
	newDir.entries[newName] = moving
	if moving.isDir {
		moving.parent = newDir
	}
	oldDir.mtime, newDir.mtime = time.Now(), time.Now()
	return 0
}

func checkReplace(moving, target *node, flags uint32) syscall.Errno {
	switch {
	case flags&renameNoReplace != 0:
		return syscall.EEXIST
	case moving.isDir && !target.isDir:
		return syscall.ENOTDIR
	case !moving.isDir && target.isDir:
		return syscall.EISDIR
	case target.isDir && len(target.entries) > 0:
		return syscall.ENOTEMPTY
	}
	return 0
}

// forget drops the kernel's references; a file nothing reaches any more loses its overlay.
func (t *tree) forget(id, count uint64) {
	n, ok := t.nodes[id]
	if !ok {
		return
	}
	n.lookups -= min(count, n.lookups)
	t.retireIfUnreachable(n)
}
