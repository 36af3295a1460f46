package facts

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgtune/pgtune/engine/transport"
	"github.com/pgtune/pgtune/internal/testhost"
)

// These tests run discovery as root over a real sshd on 127.0.0.1 against
// real processes of this machine: a PostgreSQL 15 cluster and fake
// programs (copies of this test binary, see testhost.FakeMain) started by
// the unprivileged user nobody. Other test packages may run clusters of
// their own meanwhile, so where the choice depends on every process of
// the machine, the assertions are about ours.

func dialTestSSHD(t *testing.T, srv *testhost.SSHServer) *transport.SSH {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := transport.DialSSH(ctx, transport.SSHConfig{
		Name: "testhost", Address: "127.0.0.1", Port: srv.Port, User: srv.User,
		PrivateKeyFile: srv.KeyFile, KnownHostsFile: srv.KnownHostsFile, ConnectTimeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// rawDiscover runs the discovery script with no pg_data and keeps the
// blocks of the given PIDs (postmaster or impostor).
func rawDiscover(t *testing.T, tr transport.Transport, pids ...int) []block {
	t.Helper()
	res, err := tr.Run(context.Background(), transport.Command{Args: []string{"sh", "-c", discoverScript, "sh", "", "", ""}})
	if err != nil {
		t.Fatal(err)
	}
	var mine []block
	for _, b := range parseBlocks(res.Stdout) {
		for _, p := range pids {
			if b.get("pid") == strconv.Itoa(p) && (b.kind == "postmaster" || b.kind == "impostor") {
				mine = append(mine, b)
			}
		}
	}
	return mine
}

// noteFor returns the note about pid, "" when there is none.
func noteFor(notes []string, pid int) string {
	for _, n := range notes {
		if strings.HasPrefix(n, fmt.Sprintf("ignored process %d ", pid)) {
			return n
		}
	}
	return ""
}

func TestDiscoverIgnoresImpostorsOverSSH(t *testing.T) {
	// Discovery reads every process of this machine: other packages'
	// clusters must not come and go mid-read.
	testhost.WatchKernel(t) // skips under -short, as SSHD does
	srv := testhost.SSHD(t)
	c := testhost.Postgres(t)
	tr := dialTestSSHD(t, srv)
	ctx := context.Background()
	realPID := c.PID(t)

	bin := testhost.FakeBinDir(t, "nobody", "postgres")
	fake := filepath.Join(bin, "postgres")
	// A: in a directory it owns, with PG_VERSION and no postmaster.pid.
	dirA := testhost.OwnedDir(t, "nobody")
	testhost.WriteOwned(t, "nobody", filepath.Join(dirA, "PG_VERSION"), "15\n", 0o644)
	pidA := testhost.StartFake(t, fake, "nobody", dirA)
	// B: its postmaster.pid names the real postmaster.
	dirB := testhost.OwnedDir(t, "nobody")
	testhost.WriteOwned(t, "nobody", filepath.Join(dirB, "PG_VERSION"), "15\n", 0o644)
	testhost.WriteOwned(t, "nobody", filepath.Join(dirB, "postmaster.pid"), testhost.PIDFile(realPID, dirB, c.Port, c.SocketDir), 0o600)
	pidB := testhost.StartFake(t, fake, "nobody", dirB)
	// C: its postmaster.pid names it, but the directory is root's, and its
	// name carries terminal escapes.
	dirC := filepath.Join(testhost.OwnedDir(t, "root"), "db\x1b[2K\rdb1: in policy")
	if err := os.Mkdir(dirC, 0o755); err != nil {
		t.Fatal(err)
	}
	testhost.WriteOwned(t, "root", filepath.Join(dirC, "PG_VERSION"), "15\n", 0o644)
	pidC := testhost.StartFake(t, fake, "nobody", dirC)
	testhost.WriteOwned(t, "root", filepath.Join(dirC, "postmaster.pid"), testhost.PIDFile(pidC, dirC, 5432, "/tmp"), 0o644)

	wantNotes := map[int]string{
		pidA: fmt.Sprintf("no postmaster.pid to read in %q", dirA),
		pidB: fmt.Sprintf("the postmaster.pid of %q does not name it (it names pid %d)", dirB, realPID),
		pidC: fmt.Sprintf("it runs as uid %s, but %q belongs to uid 0", testhost.UID(t, "nobody"), dirC),
	}
	checkNotes := func(t *testing.T, notes []string) {
		t.Helper()
		for pid, reason := range wantNotes {
			n := noteFor(notes, pid)
			if !strings.Contains(n, reason) || !strings.Contains(n, strconv.Quote(fake)) || !strings.HasSuffix(n, "; it was not run") {
				t.Errorf("note for pid %d: %q; want one saying %q", pid, n, reason)
			}
			if strings.ContainsAny(n, "\x1b\r\n") {
				t.Errorf("raw control characters in %q", n)
			}
		}
	}

	t.Run("pg_data picks the cluster, impostors are noted", func(t *testing.T) {
		pg, notes, err := Discover(ctx, tr, Options{PGData: c.DataDir})
		if err != nil {
			t.Fatal(err)
		}
		if pg.DataDir != c.DataDir || !pg.Running || pg.PID != realPID || pg.BinDir != c.BinDir || !strings.HasPrefix(pg.Version, "15.") {
			t.Errorf("discovered %+v", pg)
		}
		checkNotes(t, notes)
	})

	t.Run("pg_data through a symlink: the owner is the real directory's", func(t *testing.T) {
		link := filepath.Join(testhost.OwnedDir(t, "root"), "data")
		if err := os.Symlink(c.DataDir, link); err != nil {
			t.Fatal(err)
		}
		pg, _, err := Discover(ctx, tr, Options{PGData: link})
		if err != nil {
			t.Fatal(err)
		}
		if pg.DataDir != c.DataDir || pg.Owner != c.Owner || pg.PID != realPID {
			t.Errorf("discovered %+v", pg)
		}
	})

	t.Run("without pg_data, impostors never count", func(t *testing.T) {
		pg, notes, err := Discover(ctx, tr, Options{})
		checkNotes(t, notes)
		if err != nil {
			// Another package's cluster may be running too; the error
			// must still be about real postmasters only.
			for _, pid := range []int{pidA, pidB, pidC} {
				if strings.Contains(err.Error(), fmt.Sprintf("(pid %d)", pid)) {
					t.Errorf("impostor %d counted: %v", pid, err)
				}
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("%s (pid %d)", c.DataDir, realPID)) {
				t.Errorf("error %v does not list our cluster", err)
			}
			return
		}
		if pg == nil || pg.DataDir != c.DataDir || pg.PID != realPID {
			t.Errorf("discovered %+v; want our cluster", pg)
		}
	})

	t.Run("the machine's processes, ours only", func(t *testing.T) {
		blocks := rawDiscover(t, tr, realPID, pidA, pidB, pidC)
		pg, notes, err := choosePostgres(blocks, Options{})
		if err != nil || pg == nil || pg.DataDir != c.DataDir || pg.PID != realPID {
			t.Fatalf("chose %+v, %v from %+v", pg, err, blocks)
		}
		checkNotes(t, notes)
		if len(notes) != 3 {
			t.Errorf("notes %q", notes)
		}
	})

	t.Run("impostors alone: no cluster, no failure", func(t *testing.T) {
		pg, notes, err := choosePostgres(rawDiscover(t, tr, pidA, pidB, pidC), Options{})
		if err != nil || pg != nil {
			t.Fatalf("got %+v, %v; want no cluster and no error", pg, err)
		}
		checkNotes(t, notes)
	})

	if ran := testhost.Executions(t, bin, srv.Port); len(ran) != 0 {
		t.Errorf("the impostor binary was run: %q", ran)
	}
}

// A cluster an unprivileged user runs from a bin directory of its own is a
// genuine cluster; its binaries run as that user, never as root.
func TestDiscoverRunsOwnersBinaryAsOwner(t *testing.T) {
	testhost.WatchKernel(t) // discovery reads every process; skips under -short
	srv := testhost.SSHD(t)
	tr := dialTestSSHD(t, srv)
	ctx := context.Background()

	bin := testhost.FakeBinDir(t, "nobody", "postgres")
	data := testhost.OwnedDir(t, "nobody")
	if err := os.Chmod(data, 0o700); err != nil {
		t.Fatal(err)
	}
	testhost.WriteOwned(t, "nobody", filepath.Join(data, "PG_VERSION"), "15\n", 0o600)
	pid := testhost.StartFake(t, filepath.Join(bin, "postgres"), "nobody", data)
	testhost.WriteOwned(t, "nobody", filepath.Join(data, "postmaster.pid"), testhost.PIDFile(pid, data, 5499, "/tmp"), 0o600)

	asNobody := "uid=" + testhost.UID(t, "nobody") + " euid=" + testhost.UID(t, "nobody") + " name=postgres "
	checkRuns := func(t *testing.T) {
		t.Helper()
		ran := testhost.Executions(t, bin, srv.Port)
		if len(ran) == 0 {
			t.Fatal("postgres --version never ran")
		}
		for _, l := range ran {
			if !strings.HasPrefix(l, asNobody) {
				t.Errorf("ran as other than nobody: %q", l)
			}
		}
		if err := os.Truncate(filepath.Join(bin, "executed"), 0); err != nil {
			t.Fatal(err)
		}
	}
	want := Postgres{Source: "postmaster", DataDir: data, BinDir: bin, ConfigFile: filepath.Join(data, "postgresql.conf"),
		Version: "15.99", Major: 15, Owner: "nobody", Running: true, PID: pid, Port: 5499, SocketDir: "/tmp"}

	t.Run("found in /proc", func(t *testing.T) {
		blocks := rawDiscover(t, tr, pid)
		if len(blocks) != 1 || blocks[0].kind != "postmaster" || blocks[0].get("bin_runs_as") != "owner" {
			t.Fatalf("blocks %+v", blocks)
		}
		pg, notes, err := choosePostgres(blocks, Options{})
		if err != nil || len(notes) != 0 {
			t.Fatalf("%v %q", err, notes)
		}
		got := *pg
		got.StartTime = 0
		if !reflect.DeepEqual(got, want) {
			t.Errorf("got  %+v\nwant %+v", got, want)
		}
		checkRuns(t)
	})

	t.Run("pg_data and pg_bin", func(t *testing.T) {
		pg, _, err := Discover(ctx, tr, Options{PGData: data, PGBin: bin})
		if err != nil {
			t.Fatal(err)
		}
		if pg.Version != "15.99" || pg.PID != pid || pg.Source != "inventory" {
			t.Errorf("got %+v", pg)
		}
		checkRuns(t)
	})
}

// A process named postgres whose working directory's name carries a
// frame of the discovery's answer (its start line, records, its end line
// with a status, under a well-formed nonce of the attacker's) cannot end
// the answer early or add to it: GatherHost reads the answer of its own
// nonce, and the impostor is noted with the name as one quoted string.
func TestGatherHostHostileFrame(t *testing.T) {
	testhost.WatchKernel(t) // skips under -short
	fakeNonce := discoveryNonce()
	// Gather lines in the name too: the discovery's records are host
	// text, never gather lines (the gather's parse stops at its frame).
	frame := "x\nM MemTotal: 1048576 kB\nI 1000\nH forged-host\n" + fakeNonce + " 0\nD " + fakeNonce + "\n[override]\nrealdata=/forged\n" + fakeNonce + " 0\n"
	bin := testhost.FakeBinDir(t, "nobody", "postgres")
	dir := filepath.Join(testhost.OwnedDir(t, "nobody"), frame) // "/forged" makes it two levels
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	nobody, _ := strconv.Atoi(testhost.UID(t, "nobody"))
	if err := os.Chown(dir, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	plain, err := Gather(context.Background(), transport.NewLocal(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	pid := testhost.StartFake(t, filepath.Join(bin, "postgres"), "nobody", dir)
	f, err := GatherHost(context.Background(), transport.NewLocal(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if f.MemTotal != plain.MemTotal || f.IsRoot != plain.IsRoot || f.Hostname != plain.Hostname {
		t.Fatalf("gather facts forged through a directory name: MemTotal %d, IsRoot %v, Hostname %q; the host says %d, %v, %q",
			f.MemTotal, f.IsRoot, f.Hostname, plain.MemTotal, plain.IsRoot, plain.Hostname)
	}
	if strings.Contains(f.PostgresError, "malformed") || strings.Contains(f.PostgresError, "failed") {
		t.Fatalf("discovery: %s", f.PostgresError)
	}
	if f.Postgres != nil && strings.Contains(f.Postgres.DataDir, "forged") {
		t.Fatalf("forged cluster %+v", f.Postgres)
	}
	if n := noteFor(f.PostgresIgnored, pid); !strings.Contains(n, strconv.Quote(dir)) {
		t.Errorf("note for pid %d: %q; want one naming %q", pid, n, dir)
	}
}

// The gather's parse ends where the discovery's answer starts: host text
// in the answer that looks like gather lines sets no fact.
func TestParseGatherStopsAtDiscovery(t *testing.T) {
	nonce := discoveryNonce()
	gather := "M MemTotal: 2048 kB\nI 0\nH real\n"
	out := gather + "D " + nonce + "\ndata=/x\nM MemTotal: 1 kB\nI 1000\nH forged\n" + nonce + " 0\n"
	for name, in := range map[string][]byte{"whole output": []byte(out), "gatherPart": gatherPart([]byte(out), nonce)} {
		f, err := ParseGather(in)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if f.MemTotal != 2048*1024 || !f.IsRoot || f.Hostname != "real" {
			t.Errorf("%s: MemTotal %d, IsRoot %v, Hostname %q: forged by the discovery's answer", name, f.MemTotal, f.IsRoot, f.Hostname)
		}
	}
	if got := string(gatherPart([]byte(out), nonce)); got != gather {
		t.Errorf("gatherPart = %q, want %q", got, gather)
	}
}
