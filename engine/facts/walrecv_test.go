package facts

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgtune/pgtune/engine/transport"
	"github.com/pgtune/pgtune/internal/testhost"
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
	}{
		{"nothing read", "", nil, false},
		{"not ok", "7F000001:B26E-7F000001:1538", nil, false},
		{"read, no receiver", "ok", nil, true},
		{"v4", "ok 7F000001:B26E-7F000001:1538", []Conn{{lo, pg}}, true},
		{"v6", "ok 20010DB8000000000000000000000007:9C40-20010DB8000000000000000000000001:1538", []Conn{{v6, v6pg}}, true},
		{"malformed entries left out", "ok 7F000001:B26E 7F00001:B26E-7F000001:1538 7F000001:B26E-7F000001:15389 ZZ000001:B26E-7F000001:1538 7F000001:B26E-7F000001:1538",
			[]Conn{{lo, pg}}, true},
		{"bounded", "ok" + strings.Repeat(" 7F000001:B26E-7F000001:1538", 20), slicesRepeat(Conn{lo, pg}, MaxReceiverConns), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, read := parseWALReceiver(tc.in)
			if read != tc.read || len(got) != len(tc.want) {
				t.Fatalf("parseWALReceiver(%q) = %v, %v; want %v, %v", tc.in, got, read, tc.want, tc.read)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("parseWALReceiver(%q)[%d] = %v; want %v", tc.in, i, got[i], tc.want[i])
				}
			}
		})
	}
	if !strings.Contains(walRecvAwk, "n >= "+strconv.Itoa(MaxReceiverConns)+")") {
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
// titled title and runs body (bash), the way a postmaster's walreceiver
// child is titled: it returns the stand-in's PID. prefix runs the
// stand-in (unshare, say).
func startPostmaster(t *testing.T, title, body string, prefix ...string) int {
	t.Helper()
	for _, bin := range []string{"bash", "awk", "stat"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s: %v (Debian has it in every install)", bin, err)
		}
	}
	args := append(prefix, "sh", "-c", `bash -c 'exec -a "$T" bash -c "$B"' & wait`)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), "T="+title, "B="+body)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd.Process.Pid
}

// childTitled waits until pm has a child whose command line starts with
// title (the child's exec done).
func childTitled(t *testing.T, pm int, title string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pm) + "/task/" + strconv.Itoa(pm) + "/children")
		for _, k := range strings.Fields(string(b)) {
			c, _ := os.ReadFile("/proc/" + k + "/cmdline")
			if strings.HasPrefix(string(c), title+"\x00") {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no child of %d titled %q", pm, title)
}

func runWALRecvAwk(t *testing.T, pm int) string {
	t.Helper()
	out, err := exec.Command("awk", "-v", "pm="+strconv.Itoa(pm), walRecvAwk).Output()
	if err != nil {
		t.Fatalf("walRecvAwk: %v", err)
	}
	return string(out)
}

// TestWALRecvAwkReadsTheKernel runs the gather's WAL receiver read
// against real processes and a real TCP connection: the connection the
// receiver-titled child holds is found by its two ends (the kernel's
// /proc/net/tcp, its byte order turned); a child titled otherwise is not
// looked at; a postmaster in a network namespace of its own is not read.
func TestWALRecvAwkReadsTheKernel(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	body := "exec 3<>/dev/tcp/127.0.0.1/" + strconv.Itoa(port) + "; read -r x <&3"

	t.Run("receiver", func(t *testing.T) {
		const title = "postgres: 15/main: walreceiver streaming 0/3000148"
		pm := startPostmaster(t, title, body)
		ln.(*net.TCPListener).SetDeadline(time.Now().Add(20 * time.Second))
		c, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		childTitled(t, pm, title)
		out := runWALRecvAwk(t, pm)
		conns, read := parseWALReceiver(out)
		if !read {
			t.Fatalf("not read: %q", out)
		}
		local := netip.MustParseAddrPort(c.RemoteAddr().String())
		remote := netip.MustParseAddrPort(c.LocalAddr().String())
		if len(conns) != 1 || conns[0].Local != local || conns[0].Remote != remote {
			t.Fatalf("walRecvAwk = %q: %v; want the one connection %v-%v", out, conns, local, remote)
		}
		if !HoldsEnd(conns, local.Addr(), int(local.Port())) || HoldsEnd(conns, local.Addr(), int(local.Port())+1) || HoldsEnd(conns, remote.Addr(), int(remote.Port())) {
			t.Fatalf("HoldsEnd does not tell the receiver's own end from others: %v", conns)
		}
	})

	t.Run("other child", func(t *testing.T) {
		const title = "postgres: 15/main: checkpointer"
		pm := startPostmaster(t, title, body)
		ln.(*net.TCPListener).SetDeadline(time.Now().Add(20 * time.Second))
		c, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		childTitled(t, pm, title)
		if out := runWALRecvAwk(t, pm); strings.TrimSpace(out) != "ok" {
			t.Fatalf("walRecvAwk = %q: a connection of a child that is no WAL receiver", out)
		}
	})

	t.Run("own network namespace", func(t *testing.T) {
		// unshare -r maps the user to root in a user namespace of its
		// own, which an unprivileged user may make; root needs none.
		prefix := []string{"unshare", "-n"}
		if os.Geteuid() != 0 {
			prefix = []string{"unshare", "-r", "-n"}
		}
		const title = "postgres: walreceiver streaming"
		// Not bash's last command: that one is exec'd, title and all.
		const stayUp = "sleep 60; :"
		pm := startPostmaster(t, title, stayUp, prefix...)
		childTitled(t, pm, title)
		if out := runWALRecvAwk(t, pm); out != "" {
			t.Fatalf("walRecvAwk = %q for a postmaster in another network namespace; want nothing read", out)
		}
		// The same outside one: read, no connection.
		pm = startPostmaster(t, title, stayUp)
		childTitled(t, pm, title)
		if out := runWALRecvAwk(t, pm); strings.TrimSpace(out) != "ok" {
			t.Fatalf("walRecvAwk = %q; want ok and no connection", out)
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
	if c := pg.WALReceiver[0]; !HoldsEnd(pg.WALReceiver, netip.MustParseAddr("127.0.0.1"), row.Port) || int(c.Remote.Port()) != set.Primary.Port {
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
