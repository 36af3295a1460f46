package transport

import (
	"os"
	"slices"
	"sync"
	"syscall"
	"time"
)

// A fleet's known_hosts file names every host: parsing it again for each
// dial made a run's work grow with the square of its size (1000 hosts,
// a million lines parsed). The parsed files are kept while they do not
// change on disk, for the last few distinct lists of files (one list per
// inventory, usually).
const knownHostsCacheSize = 4

type knownHostsStamp struct {
	size  int64
	mtime time.Time
	ino   uint64
}

type knownHostsEntry struct {
	files  []string
	stamps []knownHostsStamp
	db     *knownHostsDB
}

var knownHostsCache struct {
	sync.Mutex
	entries []*knownHostsEntry // most recently used first
}

// loadKnownHosts returns the parsed files: the cached parse when no file
// changed since (size, modification time and inode; an accept-new append
// changes the size), else a new one. The knownHostsDB is read-only once
// built, so dials share it.
func loadKnownHosts(files []string) (*knownHostsDB, error) {
	stamps := make([]knownHostsStamp, 0, len(files))
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			return parseKnownHosts(files...) // reports the error as before
		}
		stamps = append(stamps, stampOf(st))
	}
	c := &knownHostsCache
	c.Lock()
	defer c.Unlock()
	for i, e := range c.entries {
		if slices.Equal(e.files, files) && slices.Equal(e.stamps, stamps) {
			copy(c.entries[1:i+1], c.entries[:i])
			c.entries[0] = e
			return e.db, nil
		}
	}
	db, err := parseKnownHosts(files...)
	if err != nil {
		return nil, err
	}
	e := &knownHostsEntry{files: slices.Clone(files), stamps: stamps, db: db}
	c.entries = slices.DeleteFunc(c.entries, func(old *knownHostsEntry) bool { return slices.Equal(old.files, files) })
	c.entries = append([]*knownHostsEntry{e}, c.entries...)
	if len(c.entries) > knownHostsCacheSize {
		c.entries = c.entries[:knownHostsCacheSize]
	}
	return db, nil
}

func stampOf(fi os.FileInfo) knownHostsStamp {
	s := knownHostsStamp{size: fi.Size(), mtime: fi.ModTime()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.ino = uint64(st.Ino)
	}
	return s
}
