package pgconf

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/expr"
	"github.com/pgtune/pgtune/engine/plan"
	"github.com/pgtune/pgtune/internal/testhost"
)

// The cluster owner plants symbolic links where pgtune reads and writes
// (PG_VERSION, postgresql.auto.conf, the drop-in). These tests run check
// and apply as root over the local transport against a real cluster and
// check the link policy (host.go): nothing root-only becomes readable by
// the owner or shows in any output, links pgtune may follow are written
// through and kept.

const linkSecret = "TOPSECRET-9d2e"

// rootSecret makes a root-only file (0600 in a 0700 directory) holding
// text that would parse as configuration.
func rootSecret(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secret.conf")
	if err := os.WriteFile(p, []byte("shared_buffers = '"+linkSecret+"'\nthis line "+linkSecret+" is not valid\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// linkTarget is liveTarget with a clean huge page pool in its facts: these
// tests are about links, not about pages other tests hold meanwhile.
func linkTarget(t *testing.T, c *testhost.Cluster, pages int64) *engine.Target {
	tg := liveTarget(t, c)
	tg.Facts.HugePagesTotal, tg.Facts.HugePagesFree, tg.Facts.HugePagesRsvd = pages, pages, 0
	return tg
}

// replaceWithLink swaps p for a link to target, putting p back in cleanup.
func replaceWithLink(t *testing.T, p, target string) {
	t.Helper()
	saved := p + ".pgtune-test-saved"
	if _, err := os.Lstat(p); err == nil {
		if err := os.Rename(p, saved); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(p); os.Rename(saved, p) })
	} else {
		t.Cleanup(func() { os.Remove(p) })
	}
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("chown", "-h", "postgres:", p).CombinedOutput(); err != nil {
		t.Fatalf("chown -h: %v: %s", err, out)
	}
}

func assertNoSecret(t *testing.T, what string, texts ...string) {
	t.Helper()
	for _, s := range texts {
		if strings.Contains(s, linkSecret) {
			t.Errorf("%s shows the root-only file's content: %s", what, s)
		}
	}
}

func planText(p *plan.ModulePlan) []string {
	if p == nil {
		return nil
	}
	var out []string
	for _, c := range p.Changes {
		out = append(out, c.Target, c.Before, c.After, c.Diff)
	}
	return append(out, p.Notes...)
}

func secretUnchanged(t *testing.T, secret string) {
	t.Helper()
	fi, err := os.Stat(secret)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(secret)
	if fi.Mode().Perm() != 0o600 || fileOwner(t, secret) != "root" || !strings.HasPrefix(string(b), "shared_buffers = '"+linkSecret) {
		t.Errorf("root-only file changed: %v %s %q", fi.Mode(), fileOwner(t, secret), b)
	}
}

// TestSymlinkedPGVersion: the scratch directory is built by the owner, so
// a PG_VERSION linked to a root-only file fails the check instead of
// landing, readable, in the owner's scratch copy.
func TestSymlinkedPGVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	c := testhost.Postgres(t)
	hp := hugePageSize(t)
	tg := linkTarget(t, c, 64)
	secret := rootSecret(t)
	replaceWithLink(t, filepath.Join(c.DataDir, "PG_VERSION"), secret)
	ctx, scratch := newOwnScratch(t)

	var p *plan.ModulePlan
	var err error
	othersScratch(t, func() { p, err = New().Check(ctx, tg, params(64*hp, nil)) })
	if err == nil {
		t.Fatal("check went through with PG_VERSION linked to a root-only file")
	}
	t.Logf("check: %v", err)
	if !strings.Contains(err.Error(), "PG_VERSION") {
		t.Errorf("error does not name PG_VERSION: %v", err)
	}
	assertNoSecret(t, "check error", err.Error())
	assertNoSecret(t, "plan", planText(p)...)
	scratch.check(t)
	secretUnchanged(t, secret)
}

// TestSymlinkedConfigRefused: postgresql.auto.conf and the drop-in as
// links the policy refuses: to a root-only file, and to a root file
// anyone may read but outside the allowed places. Check and apply refuse,
// naming the path; nothing of the target shows and nothing changes.
func TestSymlinkedConfigRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	c := testhost.Postgres(t)
	hp := hugePageSize(t)
	secret := rootSecret(t)
	// World-readable, root-owned, outside the cluster's places.
	outsideDir, err := os.MkdirTemp("/tmp", "pgtune-outside-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(outsideDir) })
	os.Chmod(outsideDir, 0o755)
	outside := filepath.Join(outsideDir, "tuning.conf")
	if err := os.WriteFile(outside, []byte("work_mem = '"+linkSecret+"'\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	auto := filepath.Join(c.DataDir, "postgresql.auto.conf")
	dropin := filepath.Join(c.DataDir, "conf.d", "002-hugepages.conf")
	if err := os.Mkdir(filepath.Dir(dropin), 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("chown", "postgres:", filepath.Dir(dropin)).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	c.AppendConf(t, "include_dir = 'conf.d'")
	for _, tc := range []struct{ name, link, target, want string }{
		{"auto.conf to a root-only file", auto, secret, "which does not exist or postgres cannot reach"},
		{"auto.conf outside the allowed places", auto, outside, "outside the allowed places"},
		{"drop-in to a root-only file", dropin, secret, "which does not exist or postgres cannot reach"},
		{"drop-in outside the allowed places", dropin, outside, "outside the allowed places"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			replaceWithLink(t, tc.link, tc.target)
			before := takeSnapshot(t, c)
			tg := linkTarget(t, c, 64)
			journal(t, tg)
			m := New()
			p, err := m.Check(context.Background(), tg, params(64*hp, func(p *Params) { p.OnOverride = expr.Literal("fix") }))
			if err == nil {
				t.Fatalf("check accepted %s → %s", tc.link, tc.target)
			}
			t.Logf("check: %v", err)
			if !strings.Contains(err.Error(), tc.link+" is reached through a symbolic link to "+tc.target) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q; want it to name %s and say %q", err, tc.link, tc.want)
			}
			assertNoSecret(t, "check error", err.Error())
			assertNoSecret(t, "plan", planText(p)...)
			after := takeSnapshot(t, c)
			for f, content := range before.files {
				if after.files[f] != content {
					t.Errorf("%s changed", f)
				}
			}
			if fi, err := os.Lstat(tc.link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
				t.Errorf("the link %s was replaced: %v %v", tc.link, fi, err)
			}
			secretUnchanged(t, secret)
			if b, _ := os.ReadFile(outside); string(b) != "work_mem = '"+linkSecret+"'\n" {
				t.Errorf("outside file changed: %q", b)
			}
		})
	}
}

// TestSymlinkedDropinFollowed: a drop-in linked to the owner's file inside
// the data directory is allowed: check plans the real file, apply writes
// it (as the owner) and keeps the link, verify reads it back through the
// link, and the backup of postgresql.conf is in the journal.
func TestSymlinkedDropinFollowed(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	c := testhost.Postgres(t)
	hp := hugePageSize(t)
	shared := filepath.Join(c.DataDir, "shared")
	real := filepath.Join(shared, "hugepages.conf")
	c.AsOwner(t, "mkdir", "-m", "0700", shared)
	c.AsOwner(t, "sh", "-c", `printf '# placeholder\n' > "$1"`, "sh", real)
	dropin := filepath.Join(c.DataDir, "conf.d", "002-hugepages.conf")
	c.AsOwner(t, "mkdir", "-m", "0700", filepath.Dir(dropin))
	c.AsOwner(t, "ln", "-s", "../shared/hugepages.conf", dropin)

	ctx := context.Background()
	tg := linkTarget(t, c, 64)
	journal(t, tg)
	m := New()
	p, err := m.Check(ctx, tg, params(64*hp, func(p *Params) { p.Restart = expr.Literal(false) }))
	if err != nil {
		t.Fatal(err)
	}
	logPlan(t, p)
	want := []string{"file " + c.ConfigFile(), "file " + real}
	if got := changeTargets(p); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("changes %q; want %q (the real file, not the link)", got, want)
	}
	if err := m.Apply(ctx, tg, p); err != nil {
		t.Fatal(err)
	}
	if err := m.Verify(ctx, tg, p); err != nil {
		t.Fatalf("verify: %v", err)
	}
	if target, err := os.Readlink(dropin); err != nil || target != "../shared/hugepages.conf" {
		t.Errorf("the link was not kept: %q %v", target, err)
	}
	b, err := os.ReadFile(real)
	if err != nil || !strings.Contains(string(b), "huge_pages = 'on'") {
		t.Errorf("real file: %q %v", b, err)
	}
	if owner := fileOwner(t, real); owner != "postgres" {
		t.Errorf("real file owned by %s", owner)
	}
	// The server reads the drop-in through the link (huge_pages is not
	// computed at run time: -C answers beside the live server).
	if out := c.AsOwner(t, filepath.Join(c.BinDir, "postgres"), "-D", c.DataDir, "-C", "huge_pages"); strings.TrimSpace(out) != "on" {
		t.Errorf("postgres -C huge_pages = %q", out)
	}
	if backup := filepath.Join(tg.Journal.Dir(), "files", real); !exists(backup) {
		t.Errorf("no backup of the real file at %s", backup)
	}
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// ownerRacer, run as the cluster owner until $1/.stop appears, keeps
// replacing every .pgtune-* temporary in the directories given after $2
// with a link to $2, logging each swap to $1/.racelog.
const ownerRacer = `ctl=$1 secret=$2
shift 2
while [ ! -e "$ctl/.stop" ]; do
  for d in "$@"; do
    for f in "$d"/.pgtune-*; do
      if [ -f "$f" ] && [ ! -L "$f" ] && rm -f -- "$f" 2>/dev/null && ln -s -- "$secret" "$f" 2>/dev/null; then echo t >> "$ctl/.racelog"; fi
    done
  done
  sleep 0.005
done
`

// TestApplyRacedByOwner: apply writes postgresql.conf (data directory) and
// the drop-in (conf.d) while the owner swaps every temporary there for a
// link to a root-only file. Whether or not apply gets through, the root-only
// file keeps owner, mode and content and shows nowhere.
func TestApplyRacedByOwner(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	c := testhost.Postgres(t)
	hp := hugePageSize(t)
	// Reachable by the owner's links (0755 directory), root-only itself.
	dir, err := os.MkdirTemp("/tmp", "pgtune-secret-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	secret := filepath.Join(dir, "secret.conf")
	if err := os.WriteFile(secret, []byte("shared_buffers = '"+linkSecret+"'\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	confd := filepath.Join(c.DataDir, "conf.d")
	c.AsOwner(t, "mkdir", "-m", "0700", confd)
	ctl := filepath.Join(c.Root, "race")
	c.AsOwner(t, "mkdir", ctl)

	ctx := context.Background()
	m := New()
	racer := exec.Command("runuser", "-u", c.Owner, "--", "sh", "-c", ownerRacer, "sh", ctl, secret, c.DataDir, confd)
	racer.Dir = "/"
	if err := racer.Start(); err != nil {
		t.Fatal(err)
	}
	stop := func() {
		if racer.Process == nil {
			return
		}
		c.AsOwner(t, "touch", filepath.Join(ctl, ".stop"))
		racer.Wait()
		racer.Process = nil
	}
	t.Cleanup(stop)
	applied := 0
	for i := 0; i < 4; i++ {
		tg := linkTarget(t, c, 64)
		journal(t, tg)
		p, err := m.Check(ctx, tg, params(int64(64-i)*hp, func(p *Params) { p.Restart = expr.Literal(false) }))
		if err != nil {
			// The racer may have renamed one of its links into place
			// after a write went through: the policy refuses it.
			assertNoSecret(t, "check error", err.Error())
			if !strings.Contains(err.Error(), "is reached through a symbolic link to "+secret) {
				t.Fatal(err)
			}
			t.Logf("check %d: %v", i, err)
			continue
		}
		err = m.Apply(ctx, tg, p)
		if err == nil {
			applied++
		} else {
			assertNoSecret(t, "apply error", err.Error())
		}
		filepath.Walk(tg.Journal.Dir(), func(p string, fi os.FileInfo, err error) error {
			if err == nil && fi.Mode().IsRegular() {
				b, _ := os.ReadFile(p)
				assertNoSecret(t, "backup "+p, string(b))
			}
			return nil
		})
	}
	stop()
	log, _ := os.ReadFile(filepath.Join(ctl, ".racelog"))
	swaps := strings.Count(string(log), "\n")
	t.Logf("%d of 4 applies went through; the owner swapped %d temporaries", applied, swaps)
	if swaps == 0 {
		t.Fatal("the racer never caught a temporary: the test proves nothing")
	}
	secretUnchanged(t, secret)
	for _, p := range []string{c.ConfigFile(), filepath.Join(confd, "002-hugepages.conf")} {
		if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() {
			if owner := fileOwner(t, p); owner != c.Owner {
				t.Errorf("%s owned by %s", p, owner)
			}
		}
	}
}
