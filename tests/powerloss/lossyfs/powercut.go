package main

import (
	"bufio"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// fusectlDir is where the kernel's fusectl file system is normally mounted.
const fusectlDir = "/sys/fs/fuse/connections"

// serveExitTimeout bounds the wait for the FUSE loops after the connection is aborted.
const serveExitTimeout = 10 * time.Second

// connectionID is the fusectl name of the mount's connection: the kernel's dev_t of the
// mount (major << 20 | minor).
func connectionID(mountPoint string) (uint64, error) {
	var stat unix.Stat_t
	if err := unix.Stat(mountPoint, &stat); err != nil {
		return 0, fmt.Errorf("stat %s: %w", mountPoint, err)
	}
	return uint64(unix.Major(stat.Dev))<<20 | uint64(unix.Minor(stat.Dev)), nil
}

// cutPower: every request fails from now on and the volatile state is dropped; the
// connection is aborted, so the kernel fails whatever still waits and its own dirty pages
// never arrive; then the mount is detached.
func cutPower(t *tree, server *fuse.Server, mountPoint string, connection uint64) error {
	if err := t.powerOff(); err != nil {
		return fmt.Errorf("dropping the staging directory: %w", err)
	}
	if err := abortConnection(connection); err != nil {
		return fmt.Errorf("aborting FUSE connection %d: %w", connection, err)
	}
	output, err := exec.Command("fusermount3", "-u", "-z", mountPoint).CombinedOutput()
	if err != nil {
		return fmt.Errorf("fusermount3 -u -z %s: %w: %s", mountPoint, err, output)
	}
	served := make(chan struct{})
	go func() { server.Wait(); close(served) }()
	select {
	case <-served:
	case <-time.After(serveExitTimeout):
		return fmt.Errorf("the FUSE loops did not stop within %v of the abort", serveExitTimeout)
	}
	log.Printf("power cut: %s unmounted, %s holds what survived", mountPoint, t.backingRoot)
	fmt.Println("power cut")
	return nil
}

// abortConnection writes to fusectl's abort file, mounting fusectl privately (and
// unmounting it again) when it is not mounted at its usual place.
func abortConnection(connection uint64) error {
	dir := fusectlDir
	mounted, err := fusectlMounted()
	if err != nil {
		return err
	}
	if !mounted {
		if dir, err = os.MkdirTemp("", "lossyfs-fusectl-"); err != nil {
			return err
		}
		defer os.Remove(dir)
		if err := unix.Mount("fusectl", dir, "fusectl", 0, ""); err != nil {
			return fmt.Errorf("mounting fusectl on %s (needs root): %w", dir, err)
		}
		defer unix.Unmount(dir, unix.MNT_DETACH) //nolint:errcheck // best effort after the abort
	}
	abort := filepath.Join(dir, fmt.Sprint(connection), "abort")
	return os.WriteFile(abort, []byte("1"), 0)
}

func fusectlMounted() (bool, error) {
	mounts, err := os.Open("/proc/self/mounts")
	if err != nil {
		return false, err
	}
	defer mounts.Close()
	scanner := bufio.NewScanner(mounts)
	for scanner.Scan() {
		fields := strings.Fields(scanner.Text())
		if len(fields) >= 3 && fields[1] == fusectlDir && fields[2] == "fusectl" {
			return true, nil
		}
	}
	return false, scanner.Err()
}
