package transport

import (
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pgtune/pgtune/internal/testhost"
)

// hangGuard bounds waits for events that must happen (see
// testhost.HangGuard): the commands these waits follow never finish on
// their own, so whatever ends them is the event under test.
const hangGuard = testhost.HangGuard

// returns runs fn and fails the test if fn is still blocked after
// hangGuard.
func returns(t testing.TB, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
	case <-time.After(hangGuard):
		t.Fatalf("%s: still blocked after %v", what, hangGuard)
	}
}

// waitExit waits for process pid (not necessarily our child) to exit,
// through a pidfd that becomes readable when it does.
func waitExit(t testing.TB, pid int) {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return // already gone
	}
	if err != nil {
		t.Fatalf("pidfd_open %d: %v", pid, err)
	}
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, int(hangGuard.Milliseconds()))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			t.Fatalf("poll pidfd %d: %v", pid, err)
		}
		if n == 0 {
			t.Fatalf("process %d still running after %v", pid, hangGuard)
		}
		return
	}
}
