package engine

import (
	"sync"

	"github.com/pgtune/pgtune/engine/facts"
)

// readCache answers a check's Target.ReadFile from the files the gather
// read with the facts (facts.Set.Files, engine/facts/files.go), instead
// of a round trip each. A target has one only without a journal (a dry
// run: check, or the plan shown before apply; apply re-checks through a
// journaled target, which reads the host), and the first change made
// through the target (a file written or removed, a kernel or sysfs value
// set, a service acted on) empties it for good, so nothing is ever read
// from it that the target itself may have changed.
type readCache struct {
	mu    sync.Mutex
	files map[string]facts.PrefetchedFile
}

// newReadCache returns the cache for a target with these facts; nil when
// the gather read no files.
func newReadCache(f *facts.Facts) *readCache {
	if f == nil || len(f.Files) == 0 {
		return nil
	}
	return &readCache{files: f.Files}
}

// cachedFile is ReadFile's answer from the cache: hit is false when the
// target has no cache (or a journal), or the file was not prefetched. The
// data is a copy: the caller may change it.
func (t *Target) cachedFile(p string) (data []byte, exists, hit bool) {
	c := t.cache
	if c == nil || t.Journal != nil {
		return nil, false, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	f, ok := c.files[p]
	if !ok {
		return nil, false, false
	}
	if !f.Exists {
		return nil, false, true
	}
	return append([]byte{}, f.Data...), true, true
}

// dropCache forgets every prefetched file: the target is about to change
// the host.
func (t *Target) dropCache() {
	c := t.cache
	if c == nil {
		return
	}
	c.mu.Lock()
	c.files = nil
	c.mu.Unlock()
}
