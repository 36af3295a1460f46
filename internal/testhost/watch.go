package testhost

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// HangGuard bounds every wait for an event that must happen: a guard
// against a test blocking forever, far above any plausible time, never a
// speed check (speed lives in benchmarks).
const HangGuard = 3 * time.Minute

// AwaitFiles blocks until cond holds, re-checking it whenever something in
// one of dirs is created, removed, renamed or written: it waits on inotify
// events, it does not poll. A dir that does not exist yet is watched
// through its parent until it appears. When stop is closed first (the
// process that was to make cond true has ended), it returns cond's last
// answer. A wait longer than HangGuard fails the test.
func AwaitFiles(t testing.TB, what string, dirs []string, stop <-chan struct{}, cond func() bool) bool {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		t.Fatalf("testhost: inotify: %v", err)
	}
	f := os.NewFile(uintptr(fd), "inotify") // non-blocking: reads wait in Go's poller
	defer f.Close()
	const mask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
		unix.IN_CLOSE_WRITE | unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_DELETE_SELF
	watched := map[string]bool{}
	watch := func() {
		watchDeepest(dirs, watched, func(p string) error {
			_, err := unix.InotifyAddWatch(fd, p, mask)
			return err
		})
	}
	watch()

	events := make(chan error, 1)
	go func() {
		buf := make([]byte, 64<<10)
		for {
			_, err := f.Read(buf)
			if err != nil {
				if !errors.Is(err, os.ErrClosed) {
					events <- err
				}
				return
			}
			select {
			case events <- nil:
			default: // a wake-up is already pending
			}
		}
	}()
	guard := time.NewTimer(HangGuard)
	defer guard.Stop()
	for {
		if cond() {
			return true
		}
		select {
		case err := <-events:
			if err != nil {
				t.Fatalf("testhost: inotify read: %v", err)
			}
			watch() // directories that appeared meanwhile
		case <-stop:
			return cond()
		case <-guard.C:
			t.Fatalf("still waiting for %s after %v", what, HangGuard)
		}
	}
}

// watchDeepest adds a watch on the deepest existing directory on the way to
// each of dirs. It walks again until a walk adds nothing: a directory made
// between the failed attempt on it and the watch on its parent raised its
// event before anything watched the parent, and a wait that stopped at the
// parent would miss everything made inside it (CI hung three minutes on
// exactly that).
func watchDeepest(dirs []string, watched map[string]bool, add func(dir string) error) {
	for added := true; added; {
		added = false
		for _, d := range dirs {
			for p := filepath.Clean(d); !watched[p]; p = filepath.Dir(p) {
				if add(p) == nil {
					watched[p] = true
					added = true
					break
				}
				if p == "/" {
					break
				}
			}
		}
	}
}
