package testhost

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestInitdbWaitsForExclusiveHolder: initdb's own servers take free huge
// pages (huge_pages = try, which PostgreSQL 15's initdb cannot be told to
// drop), so a cluster built while another package's test holds the kernel
// lock, having grown the pool for its own cluster, took that test's pages.
// Postgres, and Patroni (whose leader runs initdb), must wait for such a
// holder.
func TestInitdbWaitsForExclusiveHolder(t *testing.T) {
	builders := []struct {
		name  string
		build func(t *testing.T) (dataDir string)
	}{
		{"Postgres", func(t *testing.T) string { return Postgres(t, Stopped()).DataDir }},
		{"Patroni", func(t *testing.T) string { return Patroni(t, 1).Members[0].PG.DataDir }},
	}
	for _, b := range builders {
		t.Run(b.name, func(t *testing.T) { initdbWaits(t, b.build) })
	}
}

func initdbWaits(t *testing.T, build func(t *testing.T) string) {
	if testing.Short() {
		t.Skip("holds the kernel lock and starts PostgreSQL (integration test)")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: runs PostgreSQL as the postgres OS user")
	}
	// Hold the lock as another package's kernel test would: a file of
	// our own, not registered as this test's (HoldsKernel is false).
	f, err := os.OpenFile(LockFile, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := flock(f, syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	released := false
	release := func() {
		if !released {
			released = true
			_ = flock(f, syscall.LOCK_UN)
		}
	}
	defer release()

	var made error = fmt.Errorf("not built")
	built := make(chan struct{})
	var ok bool
	go func() {
		defer close(built)
		ok = t.Run("build", func(t *testing.T) {
			_, made = os.Stat(build(t) + "/PG_VERSION") // removed when the subtest ends
		})
	}()
	// Either the build queues behind our lock (what must happen) or it
	// finishes without it.
	deadline := time.Now().Add(2 * time.Minute)
	for !waitingOnLock(t, st.Ino) {
		select {
		case <-built:
			if !ok {
				t.Fatal("the build failed before it reached the kernel lock")
			}
			t.Fatal("initdb ran while another holder had the kernel lock exclusively")
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			release()
			<-built
			t.Fatal("the build neither waited for the kernel lock nor finished")
		}
	}
	release()
	<-built
	if made != nil {
		t.Errorf("no cluster once the lock was let go: %v", made)
	}
}

// waitingOnLock says whether this process has a flock request queued on
// the inode ino (a "->" line of /proc/locks).
func waitingOnLock(t *testing.T, ino uint64) bool {
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		t.Fatal(err)
	}
	pid, file := fmt.Sprint(os.Getpid()), fmt.Sprintf(":%d", ino)
	for _, line := range strings.Split(string(b), "\n") {
		fields := strings.Fields(line)
		// 1: -> FLOCK  ADVISORY  READ 1234 00:1a:5678 0 EOF
		if len(fields) >= 7 && fields[1] == "->" && fields[2] == "FLOCK" && fields[5] == pid && strings.HasSuffix(fields[6], file) {
			return true
		}
	}
	return false
}
