package pgconf

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ownScratch is a directory of the test's own in which the cluster owner
// makes the scratch data directories of the checks run with ctx
// (scratchParent): what a test finds there is its own, whatever other
// pgtune processes on the machine do in /tmp meanwhile.
type ownScratch struct {
	dir string
	fd  int // inotify on dir: which scratch directories were made
}

func newOwnScratch(t *testing.T) (context.Context, *ownScratch) {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "pgtune-test-scratch-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	// The owner makes its directory there, as in /tmp.
	if out, err := exec.Command("chown", "postgres:", dir).CombinedOutput(); err != nil {
		t.Fatalf("chown: %v: %s", err, out)
	}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_CREATE); err != nil {
		t.Fatal(err)
	}
	return context.WithValue(context.Background(), scratchParentKey{}, dir), &ownScratch{dir: dir, fd: fd}
}

// made lists the scratch directories made in the directory since the last
// call.
func (s *ownScratch) made(t *testing.T) []string {
	t.Helper()
	var names []string
	buf := make([]byte, 64<<10)
	for {
		n, err := unix.Read(s.fd, buf)
		if err == unix.EAGAIN {
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := strings.TrimRight(string(buf[off+unix.SizeofInotifyEvent:off+unix.SizeofInotifyEvent+int(ev.Len)]), "\x00")
			if strings.HasPrefix(name, "pgtune-scratch.") {
				names = append(names, name)
			}
			off += unix.SizeofInotifyEvent + int(ev.Len)
		}
	}
}

// left lists what is still in the directory.
func (s *ownScratch) left(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// checkScratch fails the test unless the checks since the last call made
// scratch directories in s and removed every one.
func (s *ownScratch) check(t *testing.T) {
	t.Helper()
	if made := s.made(t); len(made) == 0 {
		t.Errorf("no scratch directory was made in %s: the check did not use the test's own place", s.dir)
	}
	if left := s.left(t); len(left) > 0 {
		t.Errorf("scratch directory left behind: %v", left)
	}
}

// othersScratch is a scratch directory of another pgtune on this machine,
// there while fn runs: nothing a test concludes may depend on it.
func othersScratch(t *testing.T, fn func()) {
	t.Helper()
	d, err := os.MkdirTemp("/tmp", "pgtune-scratch.")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(d)
	fn()
}
