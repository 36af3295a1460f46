package facts

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/internal/testhost"
)

// TestRefreshNeverRunsOwnersBinaryAsRoot: a cluster run by nobody from a
// bin directory nobody controls is found (its postgres runs as nobody).
// Before pgtune re-reads it (RefreshPostgres, after a restart), nobody
// swaps the data directory for a link to a root-owned directory. The
// re-read fails, and it never runs nobody's binary as root: the bin
// directory found on the host is not the inventory's pg_bin, and a
// directory root owns is no cluster's.
func TestRefreshNeverRunsOwnersBinaryAsRoot(t *testing.T) {
	testhost.WatchKernel(t) // discovery reads every process; skips under -short
	srv := testhost.SSHD(t)
	tr := dialTestSSHD(t, srv)
	ctx := context.Background()

	bin := testhost.FakeBinDir(t, "nobody", "postgres")
	parent := testhost.OwnedDir(t, "nobody")
	data := filepath.Join(parent, "main")
	if err := os.Rename(testhost.OwnedDir(t, "nobody"), data); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(data, 0o700); err != nil {
		t.Fatal(err)
	}
	testhost.WriteOwned(t, "nobody", filepath.Join(data, "PG_VERSION"), "15\n", 0o600)
	pid := testhost.StartFake(t, filepath.Join(bin, "postgres"), "nobody", data)
	testhost.WriteOwned(t, "nobody", filepath.Join(data, "postmaster.pid"), testhost.PIDFile(pid, data, 5498, "/tmp"), 0o600)

	blocks := rawDiscover(t, tr, pid)
	pg, _, err := choosePostgres(blocks, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if pg.BinDir != bin {
		t.Fatalf("found %+v, want the binaries in %s", pg, bin)
	}

	// What the owner can do in its own directory: the data directory
	// becomes a link to one root owns (with a PG_VERSION, as a cluster's).
	rootDir := testhost.OwnedDir(t, "root")
	testhost.WriteOwned(t, "root", filepath.Join(rootDir, "PG_VERSION"), "15\n", 0o644)
	if err := os.Rename(data, data+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(rootDir, data); err != nil {
		t.Fatal(err)
	}
	if _, err := RefreshPostgres(ctx, tr, false, pg); err == nil || !strings.Contains(err.Error(), "owned by root") {
		t.Errorf("refresh: err = %v, want the root-owned directory refused", err)
	}
	nobody := "uid=" + testhost.UID(t, "nobody") + " euid=" + testhost.UID(t, "nobody") + " "
	for _, l := range testhost.Executions(t, bin, srv.Port) {
		if !strings.HasPrefix(l, nobody) {
			t.Errorf("the owner's binary ran as other than nobody: %q", l)
		}
	}
}
