package testhost

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Sessions counts the connections sshd is serving right now: the children
// of its listener (one per connection, pre-auth ones included). It reads
// the process table, so it sees what the server holds, not what a client
// believes it closed.
func (s *SSHServer) Sessions(t testing.TB) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.Dir, "sshd.pid"))
	if err != nil {
		t.Fatalf("testhost: sshd pid: %v", err)
	}
	listener := strings.TrimSpace(string(b))
	procs, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range procs {
		stat, err := os.ReadFile(p)
		if err != nil {
			continue // exited meanwhile
		}
		// pid (comm) state ppid …; comm may hold spaces and parentheses.
		i := strings.LastIndexByte(string(stat), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) > 1 && f[1] == listener {
			n++
		}
	}
	return n
}

// WaitSessions waits (bounded by limit) until sshd serves want
// connections, and returns the last count seen. A client's close reaches
// sshd's children asynchronously; there is no event to wait on.
func (s *SSHServer) WaitSessions(t testing.TB, want int, limit time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		n := s.Sessions(t)
		if n == want || time.Now().After(deadline) {
			return n
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// withConfig puts extra sshd_config lines in place of the default lines
// with the same keyword (sshd takes some keywords' first value and others'
// last, so a keyword must appear once), and adds the others first.
func withConfig(defaults, extra []string) []string {
	keyword := func(line string) string {
		f := strings.Fields(line)
		if len(f) == 0 {
			return ""
		}
		return strings.ToLower(f[0])
	}
	override := map[string]bool{}
	for _, e := range extra {
		override[keyword(e)] = true
	}
	out := append([]string(nil), extra...)
	for _, d := range defaults {
		if k := keyword(d); k == "" || !override[k] {
			out = append(out, d)
		}
	}
	return out
}
