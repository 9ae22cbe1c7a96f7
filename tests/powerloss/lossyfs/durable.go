package main

import (
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Making volatile state durable: the only two ways are an fsync of a file (its data and
// size) and an fsync of a directory (its entries).  Callers hold t.mu.

// syncFile applies the file's overlay and size to its backing file and fsyncs that.
func (t *tree) syncFile(file *node) error {
	return file.data.sync(func() (*os.File, error) {
		return os.OpenFile(t.stagedFilePath(file), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	})
}

// syncDir makes the directory's current entries its durable entries: names it no longer
// holds (or holds for another inode) are removed from its backing directory, names it holds
// are linked there to their inodes.  A directory without a backing directory gets one in
// staging first (it has no durable name of its own yet).
func (t *tree) syncDir(dir *node) error {
	if dir.durableEntries == nil {
		if err := os.Mkdir(t.stagedDirPath(dir), 0o755); err != nil {
			return err
		}
		dir.staged, dir.durableEntries = true, map[string]*node{}
	}
	touched := map[*node]bool{dir: true}
	for name, old := range dir.durableEntries {
		if current, ok := dir.entries[name]; ok && current == old {
			continue
		}
		if err := t.removeDurable(dir, name, old); err != nil {
			return err
		}
	}
	for name, current := range dir.entries {
		if dir.durableEntries[name] == current {
			continue
		}
		if err := t.addDurable(dir, name, current, touched); err != nil {
			return err
		}
	}
	for touchedDir := range touched {
		if err := fsyncPath(t.backingPath(touchedDir)); err != nil {
			return err
		}
	}
	return nil
}

func (t *tree) removeDurable(dir *node, name string, old *node) error {
	path := filepath.Join(t.backingPath(dir), name)
	delete(dir.durableEntries, name)
	if !old.isDir {
		return os.Remove(path)
	}
	if old.parent != nil { // renamed elsewhere: its durable contents wait in staging
		old.staged, old.durableParent, old.durableName = true, nil, ""
		return os.Rename(path, t.stagedDirPath(old))
	}
	forgetDurableSubtree(old)
	return os.RemoveAll(path)
}

// forgetDurableSubtree marks a directory whose backing directory is deleted, and every
// directory below it, as having none.
func forgetDurableSubtree(dir *node) {
	for _, child := range dir.durableEntries {
		if child.isDir && child.durableParent == dir {
			forgetDurableSubtree(child)
		}
	}
	dir.durableEntries, dir.durableParent, dir.durableName, dir.staged = nil, nil, "", false
}

func (t *tree) addDurable(dir *node, name string, child *node, touched map[*node]bool) error {
	path := filepath.Join(t.backingPath(dir), name)
	dir.durableEntries[name] = child
	if !child.isDir {
		if child.data.backing == nil { // named before its data was ever synced: 0 bytes
			if err := t.syncEmpty(child); err != nil {
				return err
			}
		}
		return os.Link(t.stagedFilePath(child), path)
	}
	if child.durableEntries == nil {
		child.durableEntries = map[string]*node{}
		child.durableParent, child.durableName = dir, name
		return os.Mkdir(path, os.FileMode(child.mode|0o700))
	}
	from := t.backingPath(child)
	if child.durableParent != nil { // it leaves its old durable name at once
		delete(child.durableParent.durableEntries, child.durableName)
		touched[child.durableParent] = true
	}
	child.staged, child.durableParent, child.durableName = false, dir, name
	return os.Rename(from, path)
}

// syncEmpty gives a file whose data was never synced an empty backing file, as a real file
// system names a new inode with no data blocks.
func (t *tree) syncEmpty(file *node) error {
	backing, err := os.OpenFile(t.stagedFilePath(file), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if err := unix.Fsync(int(backing.Fd())); err != nil {
		_ = backing.Close()
		return err
	}
	data := file.data
	data.backing, data.durableSizeBytes, data.cutBytes = backing, 0, 0
	return nil
}

func fsyncPath(path string) error {
	dir, err := os.Open(path)
	if err != nil {
		return err
	}
	defer dir.Close()
	return unix.Fsync(int(dir.Fd()))
}
