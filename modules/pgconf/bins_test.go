package pgconf

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/expr"
	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/transport"
	"github.com/pgtune/pgtune/internal/testhost"
)

// A cluster that nobody runs from a bin directory nobody can write: found
// over a real sshd as root, its pg_isready runs as nobody, never as root.
// The programs are fakes (testhost.FakeMain) that record who ran them.
func TestStatusRunsOwnersPgIsreadyAsOwner(t *testing.T) {
	srv := testhost.SSHD(t) // skips under -short
	ctx := context.Background()
	dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	tr, err := transport.DialSSH(dctx, transport.SSHConfig{
		Name: "testhost", Address: "127.0.0.1", Port: srv.Port, User: srv.User,
		PrivateKeyFile: srv.KeyFile, KnownHostsFile: srv.KnownHostsFile, ConnectTimeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })

	bin := testhost.FakeBinDir(t, "nobody", "postgres", "pg_isready", "pg_ctl")
	data := testhost.OwnedDir(t, "nobody")
	if err := os.Chmod(data, 0o700); err != nil {
		t.Fatal(err)
	}
	testhost.WriteOwned(t, "nobody", filepath.Join(data, "PG_VERSION"), "15\n", 0o600)
	pid := testhost.StartFake(t, filepath.Join(bin, "postgres"), "nobody", data)
	testhost.WriteOwned(t, "nobody", filepath.Join(data, "postmaster.pid"), testhost.PIDFile(pid, data, 5499, "/tmp"), 0o600)

	pg, err := facts.DiscoverPostgres(ctx, tr, facts.Options{PGData: data, PGBin: bin})
	if err != nil {
		t.Fatal(err)
	}
	if pg.BinDir != bin || pg.Version != "15.99" || pg.PID != pid || pg.Owner != "nobody" {
		t.Fatalf("discovered %+v", pg)
	}
	tg := &engine.Target{Name: "testhost", Transport: tr, Facts: &facts.Facts{Postgres: pg},
		Scope: expr.NewScope("t.yml"), StateDir: t.TempDir()}
	res, err := postgresStatus(ctx, tg, pg)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Ready || res.NewPID != pid {
		t.Errorf("status %+v", res)
	}
	// Discovery ran postgres --version, the status pg_isready: both as
	// nobody, whatever its uid on this machine.
	nobody := "uid=" + testhost.UID(t, "nobody") + " euid=" + testhost.UID(t, "nobody") + " "
	isready := 0
	for _, l := range testhost.Executions(t, bin, srv.Port) {
		switch {
		case l == nobody+`name=pg_isready args=["-q" "-d" "postgres" "-h" "/tmp" "-p" "5499"]`:
			isready++
		case l != nobody+`name=postgres args=["--version"]`:
			t.Errorf("unexpected run: %q", l)
		}
	}
	if isready != 1 {
		t.Errorf("pg_isready ran %d times as nobody; want once", isready)
	}
}

// The server log of a failed restart is read as the cluster owner: a link
// the owner puts in the log's place during the restart shows nothing that
// only root may read.
func TestRestartLogReadAsOwner(t *testing.T) {
	srv := testhost.SSHD(t) // skips under -short
	ctx := context.Background()
	dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	tr, err := transport.DialSSH(dctx, transport.SSHConfig{
		Name: "testhost", Address: "127.0.0.1", Port: srv.Port, User: srv.User,
		PrivateKeyFile: srv.KeyFile, KnownHostsFile: srv.KnownHostsFile, ConnectTimeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })

	secretDir := testhost.OwnedDir(t, "root")
	if err := os.Chmod(secretDir, 0o700); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(secretDir, "secret")
	testhost.WriteOwned(t, "root", secret, "FATAL:  root-only-line\n", 0o600)

	bin := testhost.FakeBinDir(t, "nobody", "postgres", "pg_isready")
	data := testhost.OwnedDir(t, "nobody")
	testhost.WriteOwned(t, "nobody", filepath.Join(data, "PG_VERSION"), "15\n", 0o600)
	pid := testhost.StartFake(t, filepath.Join(bin, "postgres"), "nobody", data)
	testhost.WriteOwned(t, "nobody", filepath.Join(data, "postmaster.pid"), testhost.PIDFile(pid, data, 5499, "/tmp"), 0o600)
	log := filepath.Join(data, "pgtune-startup.log")
	pg := &facts.Postgres{Source: "inventory", DataDir: data, BinDir: bin, Owner: "nobody", Version: "15.99", Major: 15,
		Running: true, PID: pid, Port: 5499, SocketDir: "/tmp"}

	for _, tc := range []struct {
		name, restart, want, notWant string
	}{
		// The owner's own log: its FATAL line is quoted.
		{"log", "echo 'FATAL:  owner-line' >> " + log + "; exit 3", "FATAL:  owner-line", ""},
		// The log swapped for a link to a root-only file mid-restart.
		{"link", "rm -f " + log + "; ln -s " + secret + " " + log + "; exit 3", "", "root-only-line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.Remove(log)
			tg := &engine.Target{Name: "testhost", Transport: tr, Facts: &facts.Facts{Postgres: pg},
				Scope: expr.NewScope("t.yml"), StateDir: t.TempDir(), Vars: map[string]any{restartVar: tc.restart}}
			res, err := restartPostgres(ctx, tg, pg, true)
			if err != nil {
				t.Fatal(err)
			}
			if res.ok() || res.Log != log {
				t.Fatalf("restart %+v", res)
			}
			if tc.want != "" && res.failure() != tc.want {
				t.Errorf("failure %q; want %q", res.failure(), tc.want)
			}
			if tc.notWant != "" && (strings.Contains(res.LogTail, tc.notWant) || strings.Contains(res.failure(), tc.notWant)) {
				t.Errorf("root-only content shown: %q", res.LogTail)
			}
		})
	}
}

// The restart script locks the data directory as root: a data directory
// the owner swapped for a link to a file that does not exist, in a
// directory only root may write, must not make root create that file.
func TestStatusLockCreatesNothingThroughLink(t *testing.T) {
	srv := testhost.SSHD(t) // skips under -short
	ctx := context.Background()
	dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	tr, err := transport.DialSSH(dctx, transport.SSHConfig{
		Name: "testhost", Address: "127.0.0.1", Port: srv.Port, User: srv.User,
		PrivateKeyFile: srv.KeyFile, KnownHostsFile: srv.KnownHostsFile, ConnectTimeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })

	rootDir := testhost.OwnedDir(t, "root")
	victim := filepath.Join(rootDir, "nologin")
	parent := testhost.OwnedDir(t, "nobody")
	data := filepath.Join(parent, "main")
	if err := os.Symlink(victim, data); err != nil {
		t.Fatal(err)
	}
	bin := testhost.FakeBinDir(t, "nobody", "pg_isready")
	pg := &facts.Postgres{Source: "inventory", DataDir: data, BinDir: bin, Owner: "nobody", Version: "15.99", Major: 15,
		Port: 5499, SocketDir: "/tmp"}
	tg := &engine.Target{Name: "testhost", Transport: tr, Facts: &facts.Facts{Postgres: pg},
		Scope: expr.NewScope("t.yml"), StateDir: t.TempDir()}
	if _, err := postgresStatus(ctx, tg, pg); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(victim); !os.IsNotExist(err) {
		t.Errorf("the status check created %s through the owner's link (%v)", victim, err)
	}
}

// postmaster.pid is read as its owner: swapped for a link to a root-only
// file, it shows root's first line to nobody, not even as a PID.
func TestStatusReadsPostmasterPidAsOwner(t *testing.T) {
	srv := testhost.SSHD(t) // skips under -short
	ctx := context.Background()
	dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	tr, err := transport.DialSSH(dctx, transport.SSHConfig{
		Name: "testhost", Address: "127.0.0.1", Port: srv.Port, User: srv.User,
		PrivateKeyFile: srv.KeyFile, KnownHostsFile: srv.KnownHostsFile, ConnectTimeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })

	secretDir := testhost.OwnedDir(t, "root")
	if err := os.Chmod(secretDir, 0o700); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(secretDir, "pin")
	testhost.WriteOwned(t, "root", secret, "424242\n", 0o600)
	data := testhost.OwnedDir(t, "nobody")
	if err := os.Symlink(secret, filepath.Join(data, "postmaster.pid")); err != nil {
		t.Fatal(err)
	}
	bin := testhost.FakeBinDir(t, "nobody", "pg_isready")
	pg := &facts.Postgres{Source: "inventory", DataDir: data, BinDir: bin, Owner: "nobody", Version: "15.99", Major: 15,
		Port: 5499, SocketDir: "/tmp"}
	tg := &engine.Target{Name: "testhost", Transport: tr, Facts: &facts.Facts{Postgres: pg},
		Scope: expr.NewScope("t.yml"), StateDir: t.TempDir()}
	res, err := postgresStatus(ctx, tg, pg)
	if err != nil {
		t.Fatal(err)
	}
	if res.OldPID == 424242 || res.NewPID == 424242 {
		t.Errorf("root read the owner's postmaster.pid link: %+v", res)
	}
}
