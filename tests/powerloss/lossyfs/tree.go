package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// rootID is FUSE's node id of the mount's root directory.
const rootID = 1

// node is a file or a directory of the volatile tree, with what of it is durable.
type node struct {
	id      uint64
	isDir   bool
	mode    uint32 // permission bits only
	uid     uint32
	gid     uint32
	mtime   time.Time
	lookups uint64 // the kernel's references (LOOKUP, CREATE, MKDIR minus FORGET)
	opens   int

	// Directories.  entries is the volatile namespace; durableEntries is what the backing
	// directory holds (nil while the directory has no backing directory).  A directory with a
	// backing directory has it at durableParent/durableName, or in staging (staged).
	parent         *node
	entries        map[string]*node
	durableEntries map[string]*node
	durableParent  *node
	durableName    string
	staged         bool

	// Regular files.  links counts the volatile names.
	links int
	data  *fileData
}

// tree is the whole file system: the volatile tree and the durable state below backingRoot.
// One mutex serialises every operation: simple, and fast enough for a test.
type tree struct {
	mu          sync.Mutex
	backingRoot string
	stagingDir  string
	nodes       map[uint64]*node
	nextID      uint64
	root        *node
	dead        bool
}

// openTree mirrors backingRoot.  stagingDir must be on the same file system (hard links,
// renames); it is emptied first: what it held had no durable name, so it is lost.
func openTree(backingRoot, stagingDir string) (*tree, error) {
	if err := os.RemoveAll(stagingDir); err != nil {
		return nil, err
	}
	if err := os.Mkdir(stagingDir, 0o700); err != nil {
		return nil, err
	}
	t := &tree{backingRoot: backingRoot, stagingDir: stagingDir, nodes: map[uint64]*node{},
		nextID: rootID}
	t.root = t.newDir(0o755, 0, 0)
	t.root.durableEntries = map[string]*node{}
	inodes := map[[2]uint64]*node{}
	if err := t.scan(t.root, backingRoot, inodes); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *tree) scan(dir *node, path string, inodes map[[2]uint64]*node) error {
	entries, err := os.ReadDir(path)
	if err != nil {
		return err
	}
	for _, entry := range entries {
		childPath := filepath.Join(path, entry.Name())
		var stat syscall.Stat_t
		if err := syscall.Lstat(childPath, &stat); err != nil {
			return err
		}
		var child *node
		switch stat.Mode & syscall.S_IFMT {
		case syscall.S_IFDIR:
			child = t.newDir(stat.Mode&0o7777, stat.Uid, stat.Gid)
			child.parent, child.durableParent, child.durableName = dir, dir, entry.Name()
			child.durableEntries = map[string]*node{}
			if err := t.scan(child, childPath, inodes); err != nil {
				return err
			}
		case syscall.S_IFREG:
			key := [2]uint64{stat.Dev, stat.Ino}
			if child = inodes[key]; child == nil {
				if child, err = t.loadFile(childPath, &stat); err != nil {
					return err
				}
				inodes[key] = child
			}
			child.links++
		default:
			return fmt.Errorf("%s: only directories and regular files are supported", childPath)
		}
		child.mtime = time.Unix(stat.Mtim.Unix())
		dir.entries[entry.Name()] = child
		dir.durableEntries[entry.Name()] = child
	}
	return nil
}

func (t *tree) loadFile(path string, stat *syscall.Stat_t) (*node, error) {
	file := t.newFile(stat.Mode&0o7777, stat.Uid, stat.Gid)
	if err := os.Link(path, t.stagedFilePath(file)); err != nil {
		return nil, err
	}
	backing, err := os.OpenFile(t.stagedFilePath(file), os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	file.data = loadedFileData(backing, stat.Size)
	return file, nil
}

func (t *tree) newNode(isDir bool, mode, uid, gid uint32) *node {
	n := &node{id: t.nextID, isDir: isDir, mode: mode, uid: uid, gid: gid, mtime: time.Now()}
	t.nextID++
	t.nodes[n.id] = n
	return n
}

func (t *tree) newDir(mode, uid, gid uint32) *node {
	dir := t.newNode(true, mode, uid, gid)
	dir.entries = map[string]*node{}
	return dir
}

func (t *tree) newFile(mode, uid, gid uint32) *node {
	file := t.newNode(false, mode, uid, gid)
	file.data = newFileData()
	return file
}

func (t *tree) stagedFilePath(file *node) string {
	return filepath.Join(t.stagingDir, fmt.Sprintf("f%d", file.id))
}

func (t *tree) stagedDirPath(dir *node) string {
	return filepath.Join(t.stagingDir, fmt.Sprintf("d%d", dir.id))
}

// backingPath is where a directory's durable entries are (it must have a backing directory).
func (t *tree) backingPath(dir *node) string {
	switch {
	case dir == t.root:
		return t.backingRoot
	case dir.staged:
		return t.stagedDirPath(dir)
	default:
		return filepath.Join(t.backingPath(dir.durableParent), dir.durableName)
	}
}

// powerOff fails everything from now on and drops every volatile change; the staging
// directory (inodes without a durable name) is deleted.
func (t *tree) powerOff() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.dead = true
	for _, n := range t.nodes {
		if n.data != nil {
			n.data.dropVolatile()
			n.data.close()
		}
	}
	return os.RemoveAll(t.stagingDir)
}
