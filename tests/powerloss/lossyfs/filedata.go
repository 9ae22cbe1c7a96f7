package main

import (
	"os"
	"sort"

	"golang.org/x/sys/unix"
)

// pageSizeBytes is the overlay's unit: a write dirties whole pages, as in a page cache.
const pageSizeBytes = 4096

// fileData is one regular file's contents: the durable bytes in a backing file and the
// volatile overlay of pages written or cut since the last sync.
//
// Reading byte i (i < sizeBytes): the overlay page holding it if there is one, else the
// backing file's byte if i < min(cutBytes, durableSizeBytes), else zero.
type fileData struct {
	backing          *os.File // nil until the data is first synced (or loaded from the backing directory)
	durableSizeBytes int64    // the backing file's size
	sizeBytes        int64    // the volatile size
	cutBytes         int64    // a truncate hid the backing file's bytes from here on
	pages            map[int64][]byte
}

func newFileData() *fileData {
	return &fileData{pages: map[int64][]byte{}}
}

// loadedFileData is a file whose durable contents are `backing` (opened read-write).
func loadedFileData(backing *os.File, sizeBytes int64) *fileData {
	return &fileData{backing: backing, durableSizeBytes: sizeBytes, sizeBytes: sizeBytes,
		cutBytes: sizeBytes, pages: map[int64][]byte{}}
}

// page returns page `index` as the volatile view has it (a copy unless it is in the overlay).
func (d *fileData) page(index int64) ([]byte, error) {
	if page, ok := d.pages[index]; ok {
		return page, nil
	}
	page := make([]byte, pageSizeBytes)
	visibleBytes := min(d.cutBytes, d.durableSizeBytes)
	start := index * pageSizeBytes
	if d.backing != nil && start < visibleBytes {
		want := min(int64(pageSizeBytes), visibleBytes-start)
		read, err := d.backing.ReadAt(page[:want], start)
		if int64(read) != want {
			return nil, err
		}
	}
	return page, nil
}

// dirtyPage returns page `index` in the overlay, loading it first if needed.
func (d *fileData) dirtyPage(index int64) ([]byte, error) {
	page, err := d.page(index)
	if err != nil {
		return nil, err
	}
	d.pages[index] = page
	return page, nil
}

// readAt fills dest from offset up to the volatile size; returns the bytes filled.  The
// durable bytes are read in one call, then the overlay's pages are laid over them.
func (d *fileData) readAt(dest []byte, offset int64) (int, error) {
	end := min(offset+int64(len(dest)), d.sizeBytes)
	if end <= offset {
		return 0, nil
	}
	out := dest[:end-offset]
	filled := int64(0)
	if visibleBytes := min(d.cutBytes, d.durableSizeBytes); d.backing != nil && offset < visibleBytes {
		want := min(end, visibleBytes) - offset
		read, err := d.backing.ReadAt(out[:want], offset)
		if int64(read) != want {
			return 0, err
		}
		filled = want
	}
	clear(out[filled:])
	if len(d.pages) > 0 {
		for index := offset / pageSizeBytes; index*pageSizeBytes < end; index++ {
			page, ok := d.pages[index]
			if !ok {
				continue
			}
			start := index * pageSizeBytes
			from, to := max(start, offset), min(start+pageSizeBytes, end)
			copy(out[from-offset:to-offset], page[from-start:to-start])
		}
	}
	return len(out), nil
}

func (d *fileData) writeAt(data []byte, offset int64) error {
	for done := 0; done < len(data); {
		position := offset + int64(done)
		index := position / pageSizeBytes
		page, err := d.dirtyPage(index)
		if err != nil {
			return err
		}
		done += copy(page[position-index*pageSizeBytes:], data[done:])
	}
	d.sizeBytes = max(d.sizeBytes, offset+int64(len(data)))
	return nil
}

// truncate sets the volatile size; bytes past a shrink read as zeros if the file grows again.
func (d *fileData) truncate(sizeBytes int64) error {
	if sizeBytes < d.sizeBytes {
		firstDropped := (sizeBytes + pageSizeBytes - 1) / pageSizeBytes
		for index := range d.pages {
			if index >= firstDropped {
				delete(d.pages, index)
			}
		}
		if within := sizeBytes % pageSizeBytes; within != 0 {
			page, err := d.dirtyPage(sizeBytes / pageSizeBytes)
			if err != nil {
				return err
			}
			clear(page[within:])
		}
		d.cutBytes = min(d.cutBytes, sizeBytes)
	}
	d.sizeBytes = sizeBytes
	return nil
}

// sync makes the volatile contents durable in the backing file (created by `create` if the
// file has none yet) and fsyncs it.
func (d *fileData) sync(create func() (*os.File, error)) error {
	if d.backing == nil {
		backing, err := create()
		if err != nil {
			return err
		}
		d.backing, d.durableSizeBytes, d.cutBytes = backing, 0, 0
	}
	if d.cutBytes < d.durableSizeBytes {
		if err := d.backing.Truncate(d.cutBytes); err != nil {
			return err
		}
	}
	indexes := make([]int64, 0, len(d.pages))
	for index := range d.pages {
		indexes = append(indexes, index)
	}
	sort.Slice(indexes, func(i, j int) bool { return indexes[i] < indexes[j] })
	for _, index := range indexes {
		start := index * pageSizeBytes
		length := min(int64(pageSizeBytes), d.sizeBytes-start)
		if _, err := d.backing.WriteAt(d.pages[index][:length], start); err != nil {
			return err
		}
	}
	if err := d.backing.Truncate(d.sizeBytes); err != nil {
		return err
	}
	if err := unix.Fdatasync(int(d.backing.Fd())); err != nil {
		return err
	}
	d.durableSizeBytes, d.cutBytes = d.sizeBytes, d.sizeBytes
	d.pages = map[int64][]byte{}
	return nil
}

// dropVolatile forgets the overlay (nothing can sync it any more).
func (d *fileData) dropVolatile() {
	d.pages = map[int64][]byte{}
}

func (d *fileData) close() {
	if d.backing != nil {
		_ = d.backing.Close()
		d.backing = nil
	}
}
