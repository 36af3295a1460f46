package patronitest

import (
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/pgtune/pgtune/internal/testhost"
)

// poolHolder plays another process on the host that takes the huge page
// pool: the moment a member's server has stopped (its postmaster.pid is
// gone, which PostgreSQL removes after it released its segment), it maps
// every free page of the default size but keep (a shared MAP_HUGETLB
// mapping: the kernel reserves the pages at once), so a start asking for
// more than keep pages is refused.
type poolHolder struct {
	stop, done chan struct{}
	once       sync.Once
	mem        []byte
	pages      int64
	err        error
}

func holdPoolWhenStopped(t *testing.T, m *testhost.PatroniMember, keep, hpBytes int64) *poolHolder {
	t.Helper()
	h := &poolHolder{stop: make(chan struct{}), done: make(chan struct{})}
	pidFile := filepath.Join(m.PG.DataDir, "postmaster.pid")
	go func() {
		defer close(h.done)
		stopped := testhost.AwaitFiles(t, m.Name+"'s server to stop", []string{m.PG.DataDir}, h.stop, func() bool {
			_, err := os.Stat(pidFile)
			return os.IsNotExist(err)
		})
		if stopped {
			h.take(keep, hpBytes)
		}
	}()
	t.Cleanup(func() {
		if _, err := h.release(); err != nil {
			t.Error(err)
		}
	})
	return h
}

// take maps the free pages but keep.
func (h *poolHolder) take(keep, hpBytes int64) {
	mi, err := testhost.Meminfo()
	if err != nil {
		h.err = err
		return
	}
	n := mi["HugePages_Free"] - mi["HugePages_Rsvd"] - keep
	if n <= 0 {
		return
	}
	h.mem, h.err = syscall.Mmap(-1, 0, int(n*hpBytes), syscall.PROT_READ|syscall.PROT_WRITE,
		syscall.MAP_SHARED|syscall.MAP_ANONYMOUS|syscall.MAP_HUGETLB)
	if h.err == nil {
		h.pages = n
	}
}

// release stops waiting, gives the pages back and says how many it held.
func (h *poolHolder) release() (int64, error) {
	h.once.Do(func() { close(h.stop) })
	<-h.done
	if h.mem != nil {
		if err := syscall.Munmap(h.mem); err != nil {
			return h.pages, err
		}
		h.mem = nil
	}
	return h.pages, h.err
}
