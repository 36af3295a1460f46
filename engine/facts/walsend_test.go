package facts

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParseSenderPeers(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     map[int][]uint64
		note     string
		read     bool
	}{
		{"nothing read", "", nil, "", false},
		{"not ok", "12 34\n", nil, "", false},
		{"no sender", "ok\n", map[int][]uint64{}, "", true},
		{"peers", "ok\n12 34\n13\n14 56 57\n", map[int][]uint64{12: {34}, 13: nil, 14: {56, 57}}, "", true},
		{"no ss", "ok noss\n12\n", map[int][]uint64{12: nil}, "noss", true},
		{"path", "ok path\n12\n", map[int][]uint64{12: nil}, "path", true},
		{"unknown note", "ok what\n12 5\n", map[int][]uint64{12: {5}}, "", true},
		{"malformed left out", "ok\n0 1\n-3 4\n4194305 9\nx 1\n12 0 -1 y 18446744073709551616 7\n", map[int][]uint64{12: {7}}, "", true},
		{"bounded", "ok\n12" + strings.Repeat(" 9", 10) + "\n", map[int][]uint64{12: {9, 9, 9, 9}}, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, note, read := parseSenderPeers(tc.in)
			if read != tc.read || note != tc.note || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("parseSenderPeers(%q) = %v, %q, %v; want %v, %q, %v", tc.in, got, note, read, tc.want, tc.note, tc.read)
			}
		})
	}
	if !strings.Contains(senderPeersAwk, "length(s) <= 10") || MaxPID >= 1e10 {
		t.Fatal("senderPeersAwk's bound on a PID is not above MaxPID")
	}
}

func TestSocketFiles(t *testing.T) {
	for _, tc := range []struct {
		dirs, pidDir string
		port         int
		want         []string
	}{
		{"/var/run/postgresql", "/var/run/postgresql", 5432, []string{"/var/run/postgresql/.s.PGSQL.5432"}},
		{"", "/tmp", 5433, []string{"/tmp/.s.PGSQL.5433"}},
		{"/run/postgresql, /tmp/", "/run/postgresql", 5432, []string{"/run/postgresql/.s.PGSQL.5432", "/tmp/.s.PGSQL.5432"}},
		{`"/tmp/a b", @abs`, "/tmp/a b", 5432, []string{"-", "@abs/.s.PGSQL.5432"}},
		{" , ", "", 5432, nil},
		{"/tmp", "/tmp", 0, nil},
	} {
		if got := socketFiles(tc.dirs, tc.pidDir, tc.port); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("socketFiles(%q, %q, %d) = %q, want %q", tc.dirs, tc.pidDir, tc.port, got, tc.want)
		}
	}
}

// TestSenderPeersAwkReadsTheKernel: senderPeersAwk, run for a stand-in
// postmaster whose child (titled as a WAL sender) holds the accepted end
// of a unix socket connection, gives the other end's inode, the test's
// own client socket, as the kernel lists it (ss); and nothing for a PID
// that is no child of the postmaster, a child not titled walsender, a
// postmaster in a PID namespace of its own, or a sender whose socket a
// path of another socket forges a second ss line for.
func TestSenderPeersAwkReadsTheKernel(t *testing.T) {
	if _, err := exec.LookPath("ss"); err != nil {
		t.Fatalf("ss: %v (iproute2: scripts/deps.sh installs it)", err)
	}
	const title = "postgres: 15/main: walsender postgres [local] streaming 0/3000148"
	// sender starts the stand-in and connects to it: the postmaster's
	// PID, the sender's, and the inode of the test's end.
	senderAt := func(t *testing.T, title, sock string) (pm, pid int, peer uint64) {
		pm = startPostmaster(t, title, "accept "+sock)
		childHolds(t, pm, title, 1)
		// Its socket may be made but not yet bound or listening.
		var c net.Conn
		var err error
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if c, err = net.Dial("unix", sock); err == nil || time.Now().After(deadline) {
				break
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		childHolds(t, pm, title, 2)
		f, err := c.(*net.UnixConn).File()
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var st syscall.Stat_t
		if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
			t.Fatal(err)
		}
		return pm, childOf(t, pm), st.Ino
	}
	sender := func(t *testing.T, title string) (pm, pid int, peer uint64, sock string) {
		sock = filepath.Join(t.TempDir(), ".s.PGSQL.5432")
		pm, pid, peer = senderAt(t, title, sock)
		return pm, pid, peer, sock
	}
	run := func(t *testing.T, pm int, sock string, pids ...int) string {
		t.Helper()
		var ps []string
		for _, p := range pids {
			ps = append(ps, strconv.Itoa(p))
		}
		out, err := exec.Command("awk", "-v", "pm="+strconv.Itoa(pm), "-v", "sock="+sock, "-v", "pids="+strings.Join(ps, " "), senderPeersAwk).Output()
		if err != nil {
			t.Fatalf("senderPeersAwk: %v", err)
		}
		return string(out)
	}

	t.Run("sender", func(t *testing.T) {
		pm, pid, peer, sock := sender(t, title)
		out := run(t, pm, sock, pid, pid)
		got, note, read := parseSenderPeers(out)
		if !read || note != "" || !reflect.DeepEqual(got, map[int][]uint64{pid: {peer}}) {
			t.Fatalf("senderPeersAwk = %q; want sender %d's peer %d", out, pid, peer)
		}
		if s := PeerWhy(StandbyInfo{PID: pid, Peers: got[pid], PeersRead: true}, []uint64{peer}); s != "" {
			t.Fatalf("the test's own socket is not tied to the sender: %s", s)
		}
	})
	t.Run("no child of the postmaster", func(t *testing.T) {
		pm, pid, _, _ := sender(t, title)
		other, _, _, sock := sender(t, title)
		if out := run(t, other, sock, pid, pm, os.Getpid()); strings.TrimSpace(out) != "ok" {
			t.Fatalf("senderPeersAwk = %q for processes that are no child of %d", out, other)
		}
	})
	t.Run("PostgreSQL 10's title", func(t *testing.T) {
		pm, pid, peer, sock := sender(t, "postgres: wal sender process postgres [local] streaming 0/3000148")
		if got, _, _ := parseSenderPeers(run(t, pm, sock, pid)); !reflect.DeepEqual(got, map[int][]uint64{pid: {peer}}) {
			t.Fatalf("senderPeersAwk: %v; want sender %d's peer %d", got, pid, peer)
		}
	})
	t.Run("no WAL sender", func(t *testing.T) {
		pm, pid, _, sock := sender(t, "postgres: 15/main: checkpointer")
		if out := run(t, pm, sock, pid); strings.TrimSpace(out) != "ok" {
			t.Fatalf("senderPeersAwk = %q for a child not titled walsender", out)
		}
	})
	t.Run("forged ss lines", func(t *testing.T) {
		pm, pid, peer, sock := sender(t, title)
		// Other sockets whose names hold lines that say the sender's
		// sockets (its listener, which ss lists only with -a, and its
		// client) are connected to inode 4242: one named in full, one
		// named as the server's socket file but for its case.
		socks := childSockets(t, pm)
		if len(socks) != 2 {
			t.Fatalf("the stand-in holds %v; want its listener and its client", socks)
		}
		var lines []string
		for _, s := range socks {
			lines = append(lines, fmt.Sprintf("u_str ESTAB 0 0 * %d * 4242", s))
		}
		// An abstract name: a path under the test's directory is too
		// long for two lines.
		for _, name := range []string{fmt.Sprintf("@pgtune-%d\n%s\n", os.Getpid(), strings.Join(lines, "\n")), filepath.Join(filepath.Dir(sock), ".S.pgsql.5432")} {
			ln, err := net.Listen("unix", name)
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			c, err := net.Dial("unix", name)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			a, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
		}
		out := run(t, pm, sock, pid)
		got, _, read := parseSenderPeers(out)
		if !read || !reflect.DeepEqual(got, map[int][]uint64{pid: {peer}}) {
			t.Fatalf("senderPeersAwk = %q; want sender %d's one peer %d, whatever other sockets are named", out, pid, peer)
		}
	})
	t.Run("the server's other socket directory", func(t *testing.T) {
		pm, pid, peer, sock := sender(t, title)
		got, note, _ := parseSenderPeers(run(t, pm, "/nonexistent/.s.PGSQL.5432 "+sock, pid))
		if note != "" || !reflect.DeepEqual(got, map[int][]uint64{pid: {peer}}) {
			t.Fatalf("senderPeersAwk: %v, %q; want sender %d's peer %d through its second socket file", got, note, pid, peer)
		}
	})
	t.Run("abstract socket", func(t *testing.T) {
		sock := fmt.Sprintf("@pgtune-test-%d/.s.PGSQL.5432", os.Getpid())
		pm, pid, peer := senderAt(t, title, sock)
		got, note, _ := parseSenderPeers(run(t, pm, sock, pid))
		if note != "" || !reflect.DeepEqual(got, map[int][]uint64{pid: {peer}}) {
			t.Fatalf("senderPeersAwk: %v, %q; want sender %d's peer %d on an abstract socket", got, note, pid, peer)
		}
	})
	t.Run("socket path ss cannot be asked for", func(t *testing.T) {
		pm, pid, _, sock := sender(t, title)
		for _, p := range []string{filepath.Join(filepath.Dir(sock), "a b", ".s.PGSQL.5432"), filepath.Dir(sock) + "/*", "relative/.s.PGSQL.5432"} {
			out := run(t, pm, p, pid)
			if got, note, read := parseSenderPeers(out); !read || note != "path" || len(got[pid]) != 0 {
				t.Fatalf("senderPeersAwk = %q for socket path %q; want it not asked", out, p)
			}
		}
	})
	t.Run("postmaster in a PID namespace of its own", func(t *testing.T) {
		prefix := []string{"unshare", "-p", "-f"}
		if os.Geteuid() != 0 {
			prefix = []string{"unshare", "-r", "-p", "-f"}
		}
		sock := filepath.Join(t.TempDir(), ".s.PGSQL.5432")
		pm := startPostmaster(t, title, "accept "+sock, prefix...)
		// pm is unshare; the stand-in postmaster is its child, PID 1
		// in the namespace.
		var inner int
		for range 1000 {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pm, pm))
			if f := strings.Fields(string(b)); len(f) == 1 {
				inner, _ = strconv.Atoi(f[0])
				break
			}
			syscall.Nanosleep(&syscall.Timespec{Nsec: 10e6}, nil)
		}
		if inner == 0 {
			t.Fatal("no postmaster in the namespace")
		}
		childHolds(t, inner, title, 1)
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", inner, inner))
		kids := strings.Fields(string(b))
		if len(kids) != 1 {
			t.Fatalf("children %q", kids)
		}
		// The server would report the sender's PID in its namespace;
		// either way nothing is read.
		k, _ := strconv.Atoi(kids[0])
		if out := run(t, inner, sock, k, 2); out != "" {
			t.Fatalf("senderPeersAwk = %q for a postmaster in a PID namespace of its own", out)
		}
	})
}
