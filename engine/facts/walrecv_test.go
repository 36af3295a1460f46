package facts

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgtune/pgtune/engine/transport"
	"github.com/pgtune/pgtune/internal/testhost"
	"golang.org/x/sys/unix"
)

func TestParseWALReceiver(t *testing.T) {
	lo := netip.MustParseAddrPort("127.0.0.1:45678")
	pg := netip.MustParseAddrPort("127.0.0.1:5432")
	v6 := netip.MustParseAddrPort("[2001:db8::7]:40000")
	v6pg := netip.MustParseAddrPort("[2001:db8::1]:5432")
	for _, tc := range []struct {
		name, in string
		want     []Conn
		read     bool
		socks    []uint64
	}{
		{"nothing read", "", nil, false, nil},
		{"not ok", "7F000001:B26E-7F000001:1538", nil, false, nil},
		{"read, no receiver", "ok", nil, true, nil},
		{"v4", "ok 7F000001:B26E-7F000001:1538", []Conn{{Local: lo, Remote: pg}}, true, nil},
		{"shared local end", "ok 7F000001:B26E-7F000001:1538 ~0050 ~* ~zz ~12345 20010DB8000000000000000000000007:9C40-20010DB8000000000000000000000001:1538",
			[]Conn{{Local: lo, Remote: pg, SharedPorts: []int{80, -1}}, {Local: v6, Remote: v6pg}}, true, nil},
		{"shared port of a connection left out", "ok ~0050 7F00001:B26E-7F000001:1538 ~0050", nil, true, nil},
		{"v6", "ok 20010DB8000000000000000000000007:9C40-20010DB8000000000000000000000001:1538", []Conn{{Local: v6, Remote: v6pg}}, true, nil},
		{"malformed entries left out", "ok 7F000001:B26E 7F00001:B26E-7F000001:1538 7F000001:B26E-7F000001:15389 ZZ000001:B26E-7F000001:1538 7F000001:B26E-7F000001:1538",
			[]Conn{{Local: lo, Remote: pg}}, true, nil},
		{"bounded", "ok" + strings.Repeat(" 7F000001:B26E-7F000001:1538", 20), slicesRepeat(Conn{Local: lo, Remote: pg}, MaxReceiverConns), true, nil},
		{"sockets", "ok #123 #4294967295 7F000001:B26E-7F000001:1538", []Conn{{Local: lo, Remote: pg}}, true, []uint64{123, 4294967295}},
		{"malformed sockets left out", "ok #0 #-1 #x #18446744073709551616 # #7", nil, true, []uint64{7}},
		{"sockets not read", "#7", nil, false, nil},
		{"sockets bounded", "ok" + strings.Repeat(" #9", 20), nil, true, []uint64{9, 9, 9, 9, 9, 9, 9, 9}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, socks, read := parseWALReceiver(tc.in)
			if read != tc.read || len(got) != len(tc.want) || !reflect.DeepEqual(socks, tc.socks) {
				t.Fatalf("parseWALReceiver(%q) = %v, %v, %v; want %v, %v, %v", tc.in, got, socks, read, tc.want, tc.socks, tc.read)
			}
			for i := range got {
				if !reflect.DeepEqual(got[i], tc.want[i]) {
					t.Fatalf("parseWALReceiver(%q)[%d] = %v; want %v", tc.in, i, got[i], tc.want[i])
				}
			}
		})
	}
	if !strings.Contains(walRecvAwk, "if (n++ >= "+strconv.Itoa(MaxReceiverConns)+")") {
		t.Fatal("walRecvAwk's bound is not MaxReceiverConns")
	}
}

func slicesRepeat(c Conn, n int) []Conn {
	out := make([]Conn, n)
	for i := range out {
		out[i] = c
	}
	return out
}

// startPostmaster starts a stand-in postmaster (sh) whose one child is
// this test binary as a WAL receiver (walRecvChild doing child), titled
// title as a postmaster's children are: it returns the stand-in's PID,
// the child's connections established. prefix runs the stand-in
// (unshare, say). Both are killed, as a process group, at the end.
func startPostmaster(t *testing.T, title, child string, prefix ...string) int {
	t.Helper()
	for _, bin := range []string{"bash", "awk", "find"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s: %v (Debian has it in every install)", bin, err)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	args := append(prefix, "sh", "-c", `bash -c 'exec -a "$T" "$BIN"' & wait`)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), "T="+title, "BIN="+exe, walRecvChildEnv+"="+child)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	})
	return cmd.Process.Pid
}

// childHolds waits until pm's child titled title holds n sockets (its
// connections made, or its listener and both ends of one).
func childHolds(t *testing.T, pm int, title string, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pm) + "/task/" + strconv.Itoa(pm) + "/children")
		for _, k := range strings.Fields(string(b)) {
			c, _ := os.ReadFile("/proc/" + k + "/cmdline")
			if !strings.HasPrefix(string(c), title+"\x00") {
				continue
			}
			fds, _ := os.ReadDir("/proc/" + k + "/fd")
			socks := 0
			for _, fd := range fds {
				if l, err := os.Readlink("/proc/" + k + "/fd/" + fd.Name()); err == nil && strings.HasPrefix(l, "socket:[") {
					socks++
				}
			}
			if socks >= n {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no child of %d titled %q holding %d sockets", pm, title, n)
}

// childOf is pm's one child.
func childOf(t *testing.T, pm int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pm, pm))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) != 1 {
		t.Fatalf("children of %d: %q", pm, f)
	}
	k, _ := strconv.Atoi(f[0])
	return k
}

// childSockets are the inodes of the sockets pm's children hold, as
// /proc lists them.
func childSockets(t *testing.T, pm int) []uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pm) + "/task/" + strconv.Itoa(pm) + "/children")
	if err != nil {
		t.Fatal(err)
	}
	var out []uint64
	for _, k := range strings.Fields(string(b)) {
		fds, _ := os.ReadDir("/proc/" + k + "/fd")
		for _, fd := range fds {
			l, err := os.Readlink("/proc/" + k + "/fd/" + fd.Name())
			if err != nil || !strings.HasPrefix(l, "socket:[") {
				continue
			}
			n, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, n)
		}
	}
	return out
}

// runWALRecvAwk runs walRecvAwk for pm and uid; vars are more awk
// variables (ct=FILE: a conntrack table of the test's).
func runWALRecvAwk(t *testing.T, pm, uid int, vars ...string) string {
	t.Helper()
	args := []string{"-v", "pm=" + strconv.Itoa(pm), "-v", "uid=" + strconv.Itoa(uid), "-v", "port=5432"}
	for _, v := range vars {
		args = append(args, "-v", v)
	}
	out, err := exec.Command("awk", append(args, walRecvAwk)...).Output()
	if err != nil {
		t.Fatalf("walRecvAwk: %v", err)
	}
	return string(out)
}

// TestWALRecvAwkReadsTheKernel runs the gather's WAL receiver read
// against real processes and real TCP connections: the connection a
// receiver-titled child holds is found by its two ends (the kernel's
// /proc/net/tcp, its byte order turned). Not reported: the connection of
// a child titled otherwise, one made by another uid, one whose local end
// another connection shares (Linux lets a connect() reuse a local port
// towards another destination: an owner could hold an honest standby's
// local end), one in a network namespace other than the gather's.
func TestWALRecvAwkReadsTheKernel(t *testing.T) {
	listen := func() (net.Listener, func() net.Conn) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		return ln, func() net.Conn {
			ln.(*net.TCPListener).SetDeadline(time.Now().Add(20 * time.Second))
			c, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			return c
		}
	}
	const title = "postgres: 15/main: walreceiver streaming 0/3000148"
	uid := os.Geteuid()
	// receiver starts a stand-in postmaster whose receiver connects to
	// a listener of the test's: its PID, the receiver's local end, the
	// listener's end (the upstream's, its port up).
	receiver := func(t *testing.T) (pm int, local, upEnd netip.AddrPort, up int) {
		ln, accept := listen()
		pm = startPostmaster(t, title, "dial "+ln.Addr().String())
		c := accept()
		childHolds(t, pm, title, 1)
		upEnd = netip.MustParseAddrPort(c.LocalAddr().String())
		return pm, netip.MustParseAddrPort(c.RemoteAddr().String()), upEnd, int(upEnd.Port())
	}

	t.Run("receiver", func(t *testing.T) {
		pm, local, remote, up := receiver(t)
		out := runWALRecvAwk(t, pm, uid)
		conns, socks, read := parseWALReceiver(out)
		if !read {
			t.Fatalf("not read: %q", out)
		}
		if len(socks) != 0 {
			t.Fatalf("walRecvAwk = %q: sockets %v; want none for a receiver over TCP", out, socks)
		}
		if len(conns) != 1 || conns[0].Local != local || conns[0].Remote != remote {
			t.Fatalf("walRecvAwk = %q: %v; want the one connection %v-%v", out, conns, local, remote)
		}
		if !ReceiverFor(conns, local.Addr(), int(local.Port()), up) || ReceiverFor(conns, local.Addr(), int(local.Port())+1, up) ||
			ReceiverFor(conns, remote.Addr(), up, up) || ReceiverFor(conns, local.Addr(), int(local.Port()), up+1) {
			t.Fatalf("ReceiverFor does not tell the receiver's own connection from others: %v", conns)
		}
		if out := runWALRecvAwk(t, pm, uid+1); strings.TrimSpace(out) != "ok" {
			t.Fatalf("walRecvAwk = %q for a postmaster of another uid: its connection was made by another", out)
		}
	})

	t.Run("local end shared", func(t *testing.T) {
		pm, local, _, up := receiver(t)
		// Another connection from the receiver's very local end, to
		// another port: the receiver's is still the one to up's port.
		ln2, accept2 := listen()
		other, err := reuseDialer(local.String()).Dial("tcp", ln2.Addr().String())
		if err != nil {
			t.Fatalf("bind a second connection to the receiver's local end %s: %v", local, err)
		}
		defer other.Close()
		accept2()
		conns, _, _ := parseWALReceiver(runWALRecvAwk(t, pm, uid))
		if !ReceiverFor(conns, local.Addr(), int(local.Port()), up) {
			t.Fatalf("%v: the receiver's connection to %d, with another from its local end to %d, is not told", conns, up, ln2.Addr().(*net.TCPAddr).Port)
		}
		// And one to the same port at another address (127.0.0.2 is
		// loopback too): which of the two the upstream serves is not
		// known.
		ln3, err := net.Listen("tcp", fmt.Sprintf("127.0.0.2:%d", up))
		if err != nil {
			t.Fatal(err)
		}
		defer ln3.Close()
		third, err := reuseDialer(local.String()).Dial("tcp", ln3.Addr().String())
		if err != nil {
			t.Fatalf("bind a third connection to the receiver's local end %s: %v", local, err)
		}
		defer third.Close()
		out := runWALRecvAwk(t, pm, uid)
		conns, _, _ = parseWALReceiver(out)
		if ReceiverFor(conns, local.Addr(), int(local.Port()), up) {
			t.Fatalf("walRecvAwk = %q: a local end two connections to port %d share is tied", out, up)
		}
	})

	t.Run("local end shared by an IPv4-mapped IPv6 socket", func(t *testing.T) {
		pm, local, _, up := receiver(t)
		ln2, err := net.Listen("tcp", fmt.Sprintf("127.0.0.2:%d", up))
		if err != nil {
			t.Fatal(err)
		}
		defer ln2.Close()
		// Go dials a mapped address over IPv4: the socket is made here.
		fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
			t.Fatal(err)
		}
		if err := unix.Bind(fd, &unix.SockaddrInet6{Port: int(local.Port()), Addr: netip.AddrFrom16(local.Addr().As16()).As16()}); err != nil {
			t.Fatalf("bind an IPv6 socket to the receiver's local end %s: %v", local, err)
		}
		if err := unix.Connect(fd, &unix.SockaddrInet6{Port: up, Addr: netip.MustParseAddr("::ffff:127.0.0.2").As16()}); err != nil {
			t.Fatalf("connect from the receiver's local end over IPv6: %v", err)
		}
		out := runWALRecvAwk(t, pm, uid)
		if conns, _, _ := parseWALReceiver(out); ReceiverFor(conns, local.Addr(), int(local.Port()), up) {
			t.Fatalf("walRecvAwk = %q: a local end an IPv4-mapped socket shares towards port %d is tied", out, up)
		}
	})

	t.Run("translated", func(t *testing.T) {
		// The conntrack table is the test's (-v ct): a row as the
		// kernel prints it (print_tuple: %pI4, %pI6 in full, %hu),
		// over a real receiver of each family.
		for _, fam := range []struct{ listen, ip, other string }{
			{"127.0.0.1:0", "127.0.0.1", "172.17.0.2"},
			{"[::1]:0", "0000:0000:0000:0000:0000:0000:0000:0001", "fd00:0000:0000:0000:0000:0000:0000:0002"},
		} {
			ln, err := net.Listen("tcp", fam.listen)
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			pm := startPostmaster(t, title, "dial "+ln.Addr().String())
			ln.(*net.TCPListener).SetDeadline(time.Now().Add(20 * time.Second))
			c, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			childHolds(t, pm, title, 1)
			local := netip.MustParseAddrPort(c.RemoteAddr().String())
			up := ln.Addr().(*net.TCPAddr).Port
			x := int(local.Port())
			proto := map[bool]string{true: "ipv4     2", false: "ipv6     10"}[local.Addr().Is4()]
			// flow: from osrc:osport to the receiver's upstream at
			// port dport, answered from rsport to the end rdport.
			flow := func(osrc string, osport, dport, rsport, rdport int) string {
				return fmt.Sprintf("%s tcp      6 431999 ESTABLISHED src=%s dst=%s sport=%d dport=%d packets=3 bytes=180 src=%s dst=%s sport=%d dport=%d [ASSURED] mark=0 zone=0 use=2\n",
					proto, osrc, fam.ip, osport, dport, fam.ip, fam.ip, rsport, rdport)
			}
			own := flow(fam.ip, x, up, up, x)
			dir := t.TempDir()
			for _, tc := range []struct {
				name, table string
				tied        bool
			}{
				{"its own flow as it is", own + flow(fam.other, 5555, up, up, 5555), true},
				{"another namespace's flow to the upstream's port leaves as its end", own + flow(fam.other, 40000, up, up, x), false},
				{"another namespace's flow elsewhere leaves as its end", own + flow(fam.other, 40000, 443, 443, x), true},
				{"its own flow translated", flow(fam.ip, x, up, up, x+1), false},
				{"an empty table", "", true},
				{"no table (no conntrack, or not readable)", "-", true},
			} {
				ct := filepath.Join(dir, "nf_conntrack")
				if tc.table == "-" {
					ct = filepath.Join(dir, "missing")
				} else if err := os.WriteFile(ct, []byte(tc.table), 0o644); err != nil {
					t.Fatal(err)
				}
				out := runWALRecvAwk(t, pm, uid, "ct="+ct)
				conns, _, _ := parseWALReceiver(out)
				if got := ReceiverFor(conns, local.Addr(), x, up); got != tc.tied {
					t.Errorf("%s, %s: walRecvAwk = %q: tied %v, want %v", local, tc.name, out, got, tc.tied)
				}
			}
			// Every port a translated flow goes to is listed, as a
			// number: 7432, 8080 and 999 sort above 65536 as text.
			table := own
			for _, p := range []int{7432, 8080, 999, 65535} {
				table += flow(fam.other, 40000+p%1000, p, p, x)
			}
			ct := filepath.Join(dir, "nf_conntrack")
			if err := os.WriteFile(ct, []byte(table), 0o644); err != nil {
				t.Fatal(err)
			}
			out := runWALRecvAwk(t, pm, uid, "ct="+ct)
			if conns, _, _ := parseWALReceiver(out); len(conns) != 1 || !reflect.DeepEqual(conns[0].SharedPorts, []int{7432, 8080, 999, 65535}) {
				t.Errorf("%s: walRecvAwk = %q: %+v; want the translated flows' ports 7432, 8080, 999, 65535", local, out, conns)
			}
		}
	})

	t.Run("other child", func(t *testing.T) {
		const other = "postgres: 15/main: checkpointer"
		ln, accept := listen()
		pm := startPostmaster(t, other, "dial "+ln.Addr().String())
		accept()
		childHolds(t, pm, other, 1)
		if out := runWALRecvAwk(t, pm, uid); strings.TrimSpace(out) != "ok" {
			t.Fatalf("walRecvAwk = %q: a connection of a child that is no WAL receiver", out)
		}
	})

	t.Run("over a unix socket", func(t *testing.T) {
		// The receiver's socket is listed, the test's accepted end not;
		// once another process holds it too (as one holds a socket the
		// kernel numbered alike, its counter wrapped), it is not.
		sock := filepath.Join(t.TempDir(), ".s.PGSQL.5432")
		ln, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		pm := startPostmaster(t, title, "unix "+sock)
		a, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		childHolds(t, pm, title, 1)
		want := childSockets(t, pm)
		out := runWALRecvAwk(t, pm, uid)
		if conns, socks, read := parseWALReceiver(out); !read || len(conns) != 0 || !reflect.DeepEqual(socks, want) || len(want) != 1 {
			t.Fatalf("walRecvAwk = %q; want the receiver's one socket %v", out, want)
		}
		// A look through the descriptors that did not end ties nothing.
		for _, scan := range []string{"no-such-command", "exit 3", "kill -9 $$"} {
			if out := runWALRecvAwk(t, pm, uid, "scan="+scan); strings.TrimSpace(out) != "ok" {
				t.Fatalf("walRecvAwk = %q when the look through every process's descriptors was %q", out, scan)
			}
		}
		kid := childOf(t, pm)
		pfd, err := unix.PidfdOpen(kid, 0)
		if err != nil {
			t.Fatalf("pidfd_open: %v", err)
		}
		defer unix.Close(pfd)
		got := -1
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", kid))
		for _, fd := range fds {
			n, _ := strconv.Atoi(fd.Name())
			if l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", kid, n)); l == fmt.Sprintf("socket:[%d]", want[0]) {
				if got, err = unix.PidfdGetfd(pfd, n, 0); err != nil {
					t.Fatalf("pidfd_getfd: %v", err)
				}
			}
		}
		if got < 0 {
			t.Fatalf("the receiver's socket %d is not among its descriptors", want[0])
		}
		defer unix.Close(got)
		if out := runWALRecvAwk(t, pm, uid); strings.TrimSpace(out) != "ok" {
			t.Fatalf("walRecvAwk = %q; want no socket that another process holds too", out)
		}
	})

	t.Run("more unix sockets than a receiver holds", func(t *testing.T) {
		sock := filepath.Join(t.TempDir(), ".s.PGSQL.5432")
		ln, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				defer c.Close()
			}
		}()
		pm := startPostmaster(t, title, "many "+sock)
		childHolds(t, pm, title, 9)
		if out := runWALRecvAwk(t, pm, uid); strings.TrimSpace(out) != "ok" {
			t.Fatalf("walRecvAwk = %q; want no socket of a receiver holding 9", out)
		}
	})

	t.Run("own network namespace", func(t *testing.T) {
		// unshare -r maps the user to root in a user namespace of its
		// own, which an unprivileged user may make; root needs none.
		prefix := []string{"unshare", "-n"}
		if os.Geteuid() != 0 {
			prefix = []string{"unshare", "-r", "-n"}
		}
		pm := startPostmaster(t, title, "loop", prefix...)
		childHolds(t, pm, title, 3)
		// Its sockets are listed (a unix socket's inode is the machine's),
		// its connections not.
		out := runWALRecvAwk(t, pm, uid)
		if conns, socks, read := parseWALReceiver(out); !read || len(conns) != 0 || len(socks) != 3 {
			t.Fatalf("walRecvAwk = %q for a receiver in another network namespace; want its 3 sockets and no connection", out)
		}
	})
}

// TestWALReceiverOverTCP: a real standby streaming from its primary over
// TCP. The gather reads, from the standby's kernel, its WAL receiver's
// connection: its local end is the client address and port the primary's
// pg_stat_replication shows for the standby, its remote end the
// primary's port. The primary, no standby, has nothing read (and no
// process spent on it).
func TestWALReceiverOverTCP(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: a primary and a standby streaming over TCP")
	}
	set := testhost.StreamingReplication(t, 1)
	s := set.Standbys[0]
	s.AppendConf(t, fmt.Sprintf("primary_conninfo = 'host=127.0.0.1 port=%d user=postgres password=%s application_name=standby1'",
		set.Primary.Port, testhost.ReplicaPassword))
	s.Stop(t)
	s.Start(t)
	var row StandbyInfo
	testhost.AwaitFiles(t, "the standby to stream over TCP", []string{s.Root}, nil, func() bool {
		topo := topologyOf(t, set.Primary.DataDir)
		for _, r := range topo.Standbys {
			if r.Name == "standby1" && r.Addr == "127.0.0.1" && r.State == "streaming" {
				row = r
				return true
			}
		}
		return false
	})
	if row.Port <= 0 {
		t.Fatalf("primary's row for the standby: %+v; want its client port", row)
	}
	ctx := context.Background()
	pg, err := DiscoverPostgres(ctx, transport.NewLocal(), Options{PGData: s.DataDir})
	if err != nil {
		t.Fatal(err)
	}
	if !pg.WALReceiverRead || len(pg.WALReceiver) != 1 {
		t.Fatalf("standby's WAL receiver: read %v, %v; want its one connection", pg.WALReceiverRead, pg.WALReceiver)
	}
	if c := pg.WALReceiver[0]; !ReceiverFor(pg.WALReceiver, netip.MustParseAddr("127.0.0.1"), row.Port, set.Primary.Port) {
		t.Fatalf("standby's WAL receiver connection %v; the primary shows the client at 127.0.0.1:%d, and listens on %d", c, row.Port, set.Primary.Port)
	}
	ppg, err := DiscoverPostgres(ctx, transport.NewLocal(), Options{PGData: set.Primary.DataDir})
	if err != nil {
		t.Fatal(err)
	}
	if ppg.WALReceiverRead || len(ppg.WALReceiver) != 0 {
		t.Fatalf("primary: WAL receiver read %v, %v; want nothing", ppg.WALReceiverRead, ppg.WALReceiver)
	}
}

// TestWALRecvAwkConntrackText: an end as walRecvAwk holds it, written as
// the kernel writes conntrack rows (print_tuple: %pI4, %pI6 in full and
// lower case, %hu), by walRecvAwk's own functions.
func TestWALRecvAwkConntrackText(t *testing.T) {
	funcs := walRecvAwk[:strings.Index(walRecvAwk, "BEGIN {")]
	for in, want := range map[string]string{
		"0A000001:1538":                         "10.0.0.1 5432",
		"FFFFFFFF:FFFF":                         "255.255.255.255 65535",
		"20010DB80000000000000000000000AB:1F90": "2001:0db8:0000:0000:0000:0000:0000:00ab 8080",
		"00000000000000000000000000000001:0001": "0000:0000:0000:0000:0000:0000:0000:0001 1",
	} {
		out, err := exec.Command("awk", "-v", "e="+in, funcs+"BEGIN { print text(e) }").Output()
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(string(out)); got != want {
			t.Errorf("text(%s) = %q, want %q", in, got, want)
		}
	}
}
