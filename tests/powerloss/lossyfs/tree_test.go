package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// These tests drive the tree directly (no kernel): each change, then a power cut, then what
// a fresh tree over the same backing directory sees.

type fixture struct {
	t       *testing.T
	backing string
	staging string
	tree    *tree
}

func newFixture(t *testing.T) *fixture {
	base := t.TempDir()
	f := &fixture{t: t, backing: filepath.Join(base, "backing"),
		staging: filepath.Join(base, "staging")}
	if err := os.Mkdir(f.backing, 0o755); err != nil {
		t.Fatal(err)
	}
	f.remount()
	return f
}

// remount cuts the power (if mounted) and loads the durable state afresh.
func (f *fixture) remount() {
	if f.tree != nil {
		if err := f.tree.powerOff(); err != nil {
			f.t.Fatal(err)
		}
	}
	loaded, err := openTree(f.backing, f.staging)
	if err != nil {
		f.t.Fatal(err)
	}
	f.tree = loaded
}

func (f *fixture) mkdir(dir *node, name string) *node {
	child, errno := f.tree.mkdir(dir, name, 0o755, 0, 0)
	if errno != 0 {
		f.t.Fatalf("mkdir %s: %v", name, errno)
	}
	return child
}

func (f *fixture) create(dir *node, name string, data string) *node {
	file, errno := f.tree.create(dir, name, 0o644, 0, 0)
	if errno != 0 {
		f.t.Fatalf("create %s: %v", name, errno)
	}
	if err := file.data.writeAt([]byte(data), 0); err != nil {
		f.t.Fatal(err)
	}
	return file
}

func (f *fixture) syncFile(file *node) {
	if err := f.tree.syncFile(file); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) syncDir(dir *node) {
	if err := f.tree.syncDir(dir); err != nil {
		f.t.Fatal(err)
	}
}

// contents is the file at path (slash-separated, from the root), "<dir>" or "<absent>".
func (f *fixture) contents(path string) string {
	n := f.tree.root
	for _, part := range strings.Split(path, "/") {
		child, ok := n.entries[part]
		if !ok {
			return "<absent>"
		}
		n = child
	}
	if n.isDir {
		return "<dir>"
	}
	buf := make([]byte, n.data.sizeBytes)
	filled, err := n.data.readAt(buf, 0)
	if err != nil {
		f.t.Fatal(err)
	}
	return string(buf[:filled])
}

func (f *fixture) expect(path, want string) {
	f.t.Helper()
	if got := f.contents(path); got != want {
		f.t.Errorf("%s: got %q, want %q", path, got, want)
	}
}

func TestUnsyncedFileAndNameAreLost(t *testing.T) {
	f := newFixture(t)
	f.create(f.tree.root, "a", "data")
	f.expect("a", "data")
	f.remount()
	f.expect("a", "<absent>")
}

func TestSyncedFileInSyncedDirectoryIsKept(t *testing.T) {
	f := newFixture(t)
	file := f.create(f.tree.root, "a", "data")
	f.syncFile(file)
	f.syncDir(f.tree.root)
	f.remount()
	f.expect("a", "data")
}

func TestSyncedFileInUnsyncedDirectoryIsLost(t *testing.T) {
	f := newFixture(t)
	f.syncFile(f.create(f.tree.root, "a", "data"))
	f.remount()
	f.expect("a", "<absent>")
	if entries, _ := os.ReadDir(f.backing); len(entries) != 0 {
		t.Errorf("backing directory holds %v", entries)
	}
}

func TestNamedButUnsyncedFileComesBackEmpty(t *testing.T) {
	f := newFixture(t)
	f.create(f.tree.root, "a", "data")
	f.syncDir(f.tree.root)
	f.remount()
	f.expect("a", "")
}

func TestUnsyncedOverwriteAndTruncateAreLost(t *testing.T) {
	f := newFixture(t)
	file := f.create(f.tree.root, "a", "0123456789")
	f.syncFile(file)
	f.syncDir(f.tree.root)
	if err := file.data.writeAt([]byte("XY"), 8); err != nil {
		t.Fatal(err)
	}
	if err := file.data.truncate(4); err != nil {
		t.Fatal(err)
	}
	f.expect("a", "0123")
	f.remount()
	f.expect("a", "0123456789")
}

func TestTruncateThenGrowReadsZeros(t *testing.T) {
	f := newFixture(t)
	file := f.create(f.tree.root, "a", string(bytes.Repeat([]byte{'x'}, 3*pageSizeBytes)))
	f.syncFile(file)
	f.syncDir(f.tree.root)
	for _, step := range []int64{pageSizeBytes + 10, 3 * pageSizeBytes} {
		if err := file.data.truncate(step); err != nil {
			t.Fatal(err)
		}
	}
	want := string(bytes.Repeat([]byte{'x'}, pageSizeBytes+10)) +
		string(make([]byte, 2*pageSizeBytes-10))
	f.expect("a", want)
	f.syncFile(file)
	f.remount()
	f.expect("a", want)
}

func TestRenameIsDurableOnlyWithTheDestinationDirectorySynced(t *testing.T) {
	f := newFixture(t)
	dir := f.mkdir(f.tree.root, "d")
	file := f.create(dir, "creating", "prepared")
	f.syncFile(file)
	f.syncDir(dir)
	f.syncDir(f.tree.root)
	if errno := f.tree.rename(dir, "creating", dir, "final", 0); errno != 0 {
		t.Fatal(errno)
	}
	f.remount() // the rename was never synced: undone
	f.expect("d/creating", "prepared")
	f.expect("d/final", "<absent>")
	dir = f.tree.root.entries["d"]
	if errno := f.tree.rename(dir, "creating", dir, "final", 0); errno != 0 {
		t.Fatal(errno)
	}
	f.syncDir(dir)
	f.remount()
	f.expect("d/creating", "<absent>")
	f.expect("d/final", "prepared")
}

func TestRenameOverAnExistingName(t *testing.T) {
	f := newFixture(t)
	old := f.create(f.tree.root, "name", "old")
	replacement := f.create(f.tree.root, "name.tmp", "new")
	f.syncFile(old)
	f.syncFile(replacement)
	f.syncDir(f.tree.root)
	if errno := f.tree.rename(f.tree.root, "name.tmp", f.tree.root, "name", 0); errno != 0 {
		t.Fatal(errno)
	}
	f.syncDir(f.tree.root)
	f.remount()
	f.expect("name", "new")
	f.expect("name.tmp", "<absent>")
}

func TestRenameAcrossDirectoriesWithOnlyTheDestinationSyncedLeavesBothNames(t *testing.T) {
	f := newFixture(t)
	from, to := f.mkdir(f.tree.root, "from"), f.mkdir(f.tree.root, "to")
	f.syncFile(f.create(from, "a", "data"))
	f.syncDir(from)
	f.syncDir(to)
	f.syncDir(f.tree.root)
	if errno := f.tree.rename(from, "a", to, "a", 0); errno != 0 {
		t.Fatal(errno)
	}
	f.syncDir(to)
	f.remount()
	f.expect("from/a", "data")
	f.expect("to/a", "data")
}

func TestNewDirectoryNeedsItsParentSynced(t *testing.T) {
	f := newFixture(t)
	dir := f.mkdir(f.tree.root, "d")
	f.syncFile(f.create(dir, "a", "data"))
	f.syncDir(dir) // the entry is durable in d, but d itself has no durable name yet
	f.remount()
	f.expect("d", "<absent>")

	dir = f.mkdir(f.tree.root, "d")
	f.syncFile(f.create(dir, "a", "data"))
	f.syncDir(dir)
	f.syncDir(f.tree.root) // now d's name is durable, with the entries synced before
	f.remount()
	f.expect("d/a", "data")
}

func TestUnlinkAndRmdirNeedTheDirectorySynced(t *testing.T) {
	f := newFixture(t)
	dir := f.mkdir(f.tree.root, "d")
	f.syncFile(f.create(dir, "a", "data"))
	f.syncDir(dir)
	f.syncDir(f.tree.root)
	if errno := f.tree.unlink(dir, "a"); errno != 0 {
		t.Fatal(errno)
	}
	if errno := f.tree.rmdir(f.tree.root, "d"); errno != 0 {
		t.Fatal(errno)
	}
	f.remount()
	f.expect("d/a", "data")
	dir = f.tree.root.entries["d"]
	if errno := f.tree.unlink(dir, "a"); errno != 0 {
		t.Fatal(errno)
	}
	f.syncDir(dir)
	f.remount()
	f.expect("d/a", "<absent>")
	f.expect("d", "<dir>")
	if errno := f.tree.rmdir(f.tree.root, "d"); errno != 0 {
		t.Fatal(errno)
	}
	f.syncDir(f.tree.root)
	f.remount()
	f.expect("d", "<absent>")
}

func TestNamespaceErrors(t *testing.T) {
	f := newFixture(t)
	dir := f.mkdir(f.tree.root, "d")
	f.create(dir, "a", "")
	_, createErrno := f.tree.create(f.tree.root, "d", 0o644, 0, 0)
	checks := []struct {
		name string
		got  syscall.Errno
		want syscall.Errno
	}{
		{"create existing", createErrno, syscall.EEXIST},
		{"rmdir non-empty", f.tree.rmdir(f.tree.root, "d"), syscall.ENOTEMPTY},
		{"unlink a directory", f.tree.unlink(f.tree.root, "d"), syscall.EISDIR},
		{"rename into itself", f.tree.rename(f.tree.root, "d", dir, "x", 0), syscall.EINVAL},
		{"no-replace", f.tree.rename(dir, "a", f.tree.root, "d", renameNoReplace), syscall.EEXIST},
	}
	for _, check := range checks {
		if check.got != check.want {
			t.Errorf("%s: got %v, want %v", check.name, check.got, check.want)
		}
	}
}

func TestReadLaysTheOverlayOverTheDurableBytes(t *testing.T) {
	f := newFixture(t)
	durable := bytes.Repeat([]byte{'a'}, 3*pageSizeBytes)
	file := f.create(f.tree.root, "a", string(durable))
	f.syncFile(file)
	f.syncDir(f.tree.root)
	f.remount()
	file = f.tree.root.entries["a"]
	want := append([]byte(nil), durable...)
	if err := file.data.writeAt([]byte("bbbbbb"), pageSizeBytes+pageSizeBytes-3); err != nil {
		t.Fatal(err)
	}
	copy(want[2*pageSizeBytes-3:], "bbbbbb")
	for _, offset := range []int64{0, 1, pageSizeBytes - 1, 2*pageSizeBytes - 5} {
		got := make([]byte, 3*pageSizeBytes)
		filled, err := file.data.readAt(got, offset)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[:filled], want[offset:]) {
			t.Errorf("read at %d differs from the overlay laid over the durable bytes", offset)
		}
	}
}
