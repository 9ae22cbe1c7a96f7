package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// maxWriteBytes is the largest WRITE the kernel sends: dirty mmap pages of a segment arrive
// in few requests.
const maxWriteBytes = 1 << 20

func main() {
	// Registered first: a power cut asked for during the mount still runs in full.
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGUSR1, syscall.SIGTERM, syscall.SIGINT)
	backing := flag.String("backing", "", "directory holding the durable state (required)")
	staging := flag.String("staging", "", "scratch directory on the backing file system, "+
		"emptied at start (required)")
	mountPoint := flag.String("mount", "", "where to mount (required)")
	debug := flag.Bool("debug", false, "log every FUSE request")
	flag.Parse()
	if *backing == "" || *staging == "" || *mountPoint == "" {
		flag.Usage()
		os.Exit(2)
	}
	log.SetPrefix("lossyfs: ")
	if err := run(absolute(*backing), absolute(*staging), absolute(*mountPoint), *debug,
		signals); err != nil {
		log.Fatal(err)
	}
}

func absolute(path string) string {
	resolved, err := filepath.Abs(path)
	if err != nil {
		log.Fatal(err)
	}
	return resolved
}

func run(backing, staging, mountPoint string, debug bool, signals <-chan os.Signal) error {
	t, err := openTree(backing, staging)
	if err != nil {
		return fmt.Errorf("loading %s: %w", backing, err)
	}
	server, err := fuse.NewServer(newLossyFS(t), mountPoint, &fuse.MountOptions{
		FsName:                   "lossyfs:" + backing,
		Name:                     "lossyfs",
		MaxWrite:                 maxWriteBytes,
		MaxReadAhead:             maxWriteBytes, // recovery and scrubs read whole segments
		MaxBackground:            64,
		DisableXAttrs:            true,
		DisableReadDirPlus:       true, // LOOKUP counts stay in one place
		ExplicitDataCacheControl: true, // never drop cached pages on an attribute change
		Debug:                    debug,
	})
	if err != nil {
		return fmt.Errorf("mounting %s: %w", mountPoint, err)
	}
	go server.Serve()
	if err := server.WaitMount(); err != nil {
		return fmt.Errorf("waiting for the mount %s: %w", mountPoint, err)
	}
	connection, err := connectionID(mountPoint)
	if err != nil {
		return err
	}
	fmt.Printf("ready connection=%d mount=%s\n", connection, mountPoint)
	os.Stdout.Sync()
	signal := <-signals
	log.Printf("%v: cutting the power", signal)
	return cutPower(t, server, mountPoint, connection)
}
