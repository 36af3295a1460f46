package transport

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/pgtune/pgtune/internal/testhost"
)

// These tests pit the file helpers, run as root, against a real
// unprivileged user (nobody) who owns the target directory and plays
// every trick a directory owner can: swapping pgtune's temporary files and
// the target for symbolic links to a root-only file. Whatever happens to
// the writes, nothing outside that user's directory may change, and the
// root-only file's content may never come out.

const raceUser = "nobody"

// racerScript runs as the directory owner until $d/.stop appears: each
// pass replaces every .pgtune-* temporary with a link to $secret (and,
// with $target set, the target too), logging each swap it made. A pass
// takes a few milliseconds; pgtune's temporaries live longer than that.
const racerScript = `d=$1 secret=$2 log=$3 target=$4
while [ ! -e "$d/.stop" ]; do
  for f in "$d"/.pgtune-*; do
    if [ -f "$f" ] && [ ! -L "$f" ] && rm -f -- "$f" 2>/dev/null && ln -s -- "$secret" "$f" 2>/dev/null; then echo t >> "$log"; fi
  done
  if [ -n "$target" ] && [ ! -L "$d/$target" ]; then
    rm -f -- "$d/$target" 2>/dev/null; ln -s -- "$secret" "$d/$target" 2>/dev/null && echo f >> "$log"
  fi
  sleep 0.005
done
`

// hostileDir is a directory owned by the race user beside a root-only
// secret, under a root-owned traversable root.
type hostileDir struct {
	root, dir, secret, state string
	uid, gid                 int
}

const secretText = "root-only: TOPSECRET-4f1c\n"

func newHostileDir(t *testing.T) *hostileDir {
	t.Helper()
	if testing.Short() {
		t.Skip("runs a racer as an unprivileged user (integration test; run without -short)")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: pits root's writes against an unprivileged user")
	}
	u, err := user.Lookup(raceUser)
	if err != nil {
		t.Fatalf("no %s user: %v", raceUser, err)
	}
	h := &hostileDir{}
	h.uid, _ = strconv.Atoi(u.Uid)
	h.gid, _ = strconv.Atoi(u.Gid)
	h.root, err = os.MkdirTemp("/tmp", "pgtune-race-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(h.root) })
	must(t, os.Chmod(h.root, 0o755))
	h.dir = filepath.Join(h.root, "conf.d")
	must(t, os.Mkdir(h.dir, 0o755))
	must(t, os.Chown(h.dir, h.uid, h.gid))
	h.secret = filepath.Join(h.root, "secret")
	must(t, os.WriteFile(h.secret, []byte(secretText), 0o600))
	h.state = filepath.Join(h.root, "state")
	must(t, os.Mkdir(h.state, 0o700))
	return h
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// startRacer runs racerScript as the race user and returns a stop
// function that ends it and returns how many swaps it made.
func (h *hostileDir) startRacer(t *testing.T, target string) func() int {
	t.Helper()
	log := filepath.Join(h.dir, ".racelog")
	cmd := exec.Command("runuser", "-u", raceUser, "--", "sh", "-c", racerScript, "sh", h.dir, h.secret, log, target)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	must(t, cmd.Start())
	stopped := false
	stop := func() int {
		if !stopped {
			stopped = true
			must(t, os.WriteFile(filepath.Join(h.dir, ".stop"), nil, 0o644))
			if err := cmd.Wait(); err != nil {
				t.Errorf("racer: %v: %s", err, stderr.String())
			}
			os.Remove(filepath.Join(h.dir, ".stop"))
		}
		b, _ := os.ReadFile(log)
		os.Remove(log)
		return bytes.Count(b, []byte("\n"))
	}
	t.Cleanup(func() { stop() })
	return stop
}

// outside records every file under root but the owner's directory:
// path → owner, mode and content.
func (h *hostileDir) outside(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.Walk(h.root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if p == h.dir {
			return filepath.SkipDir
		}
		st := fi.Sys().(*syscall.Stat_t)
		desc := fmt.Sprintf("%d:%d %v", st.Uid, st.Gid, fi.Mode())
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			desc += " " + string(b)
		}
		out[p] = desc
		return nil
	})
	must(t, err)
	return out
}

// assertSecretKept checks the root-only file and everything else outside
// the owner's directory are as before, and that no backup holds the secret.
func (h *hostileDir) assertSecretKept(t *testing.T, before map[string]string) {
	t.Helper()
	after := h.outside(t)
	for p, want := range before {
		if p == h.state || strings.HasPrefix(p, h.state+"/") {
			continue // backups are added there
		}
		if got := after[p]; got != want {
			t.Errorf("%s changed: %q → %q", p, want, got)
		}
	}
	fi, err := os.Stat(h.secret)
	must(t, err)
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 0 || st.Gid != 0 || fi.Mode().Perm() != 0o600 {
		t.Errorf("secret now %d:%d %v", st.Uid, st.Gid, fi.Mode())
	}
	filepath.Walk(h.state, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			if b, _ := os.ReadFile(p); bytes.Contains(b, []byte("TOPSECRET")) {
				t.Errorf("backup %s holds the root-only file's content", p)
			}
		}
		return nil
	})
}

// TestWriteRacedByDirectoryOwner: N writes (with backups) and removals
// into a directory the racer owns while it swaps every temporary for a
// link to the root-only file, over the local transport as root.
func TestWriteRacedByDirectoryOwner(t *testing.T) {
	h := newHostileDir(t)
	raceWrites(t, h, NewLocal(), false, 20)
}

// TestWriteRacedOverSSHBecome: the same over the real sshd, logged in as
// an unprivileged user who becomes root through sudo.
func TestWriteRacedOverSSHBecome(t *testing.T) {
	h := newHostileDir(t)
	srv := testhost.SSHD(t)
	testhost.EnsureUser(t, "pgtune-sudo", true)
	cfg := sshdConfig(srv)
	cfg.User = "pgtune-sudo"
	raceWrites(t, h, dial(t, cfg), true, 10)
}

func raceWrites(t *testing.T, h *hostileDir, tr Transport, become bool, n int) {
	ctx := context.Background()
	target := filepath.Join(h.dir, "002-hugepages.conf")
	must(t, os.WriteFile(target, []byte("v0\n"), 0o640))
	must(t, os.Chown(target, h.uid, h.gid))
	before := h.outside(t)
	stop := h.startRacer(t, "")
	ok := 0
	for i := 0; i < n; i++ {
		data := []byte(fmt.Sprintf("shared_buffers = %dkB\n", i+1))
		opts := WriteOptions{Backup: filepath.Join(h.state, strconv.Itoa(i), "files", target), Become: become}
		if i%2 == 1 {
			opts.AsUser = raceUser // as pgconf passes the cluster owner
		}
		err := WriteFile(ctx, tr, target, data, opts)
		if err != nil {
			if strings.Contains(err.Error(), "TOPSECRET") {
				t.Fatalf("error quotes the secret: %v", err)
			}
			continue
		}
		ok++
		// The racer may have renamed its link into place after the write
		// (the owner may always replace their own file): only a regular
		// file is read back, and never through a link.
		// O_NOFOLLOW: an Lstat then a ReadFile would be this test's own
		// race (the link renamed in between, read as root).
		if f, err := os.OpenFile(target, os.O_RDONLY|syscall.O_NOFOLLOW, 0); err == nil {
			got, err := io.ReadAll(f)
			f.Close()
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("write %d reported success, target %q %v", i, got, err)
			}
		}
	}
	// The remove path too, with a backup.
	for i := 0; i < 5; i++ {
		must(t, os.WriteFile(target+".old", []byte("old\n"), 0o644))
		os.Chown(target+".old", h.uid, h.gid)
		RemoveFile(ctx, tr, target+".old", filepath.Join(h.state, "rm", strconv.Itoa(i)), "", become)
	}
	swaps := stop()
	t.Logf("%d of %d writes went through; the racer swapped %d temporaries", ok, n, swaps)
	if swaps == 0 {
		t.Fatal("the racer never caught a temporary file: the test proves nothing")
	}
	h.assertSecretKept(t, before)
	// What landed is the owner's: written as them.
	if fi, err := os.Lstat(target); err == nil && fi.Mode().IsRegular() {
		if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != h.uid {
			t.Errorf("target owned by uid %d, want %d", st.Uid, h.uid)
		}
	}
}

// TestWriteRacedTargetLink: the racer also keeps turning the target into a
// link to the root-only file. No write may follow it: the secret keeps
// owner, mode and content and never reaches a backup or an error.
func TestWriteRacedTargetLink(t *testing.T) {
	h := newHostileDir(t)
	ctx := context.Background()
	tr := NewLocal()
	target := filepath.Join(h.dir, "postgresql.auto.conf")
	before := h.outside(t)
	stop := h.startRacer(t, "postgresql.auto.conf")
	for i := 0; i < 12; i++ {
		opts := WriteOptions{Backup: filepath.Join(h.state, strconv.Itoa(i), "files", target), AsUser: raceUser}
		err := WriteFile(ctx, tr, target, []byte("# ok\n"), opts)
		if err != nil && strings.Contains(err.Error(), "TOPSECRET") {
			t.Fatalf("error quotes the secret: %v", err)
		}
		b, err := ReadFile(ctx, tr, target, false)
		if bytes.Contains(b, []byte("TOPSECRET")) || (err != nil && strings.Contains(err.Error(), "TOPSECRET")) {
			t.Fatalf("ReadFile returned the root-only file through the owner's link")
		}
	}
	if swaps := stop(); swaps == 0 {
		t.Fatal("the racer never swapped anything: the test proves nothing")
	}
	h.assertSecretKept(t, before)
}

// TestDirectoryDecisions: who acts in which directory.
func TestDirectoryDecisions(t *testing.T) {
	h := newHostileDir(t)
	ctx := context.Background()
	tr := NewLocal()

	// A directory the owner controls: the new file is theirs, as if they
	// had written it (AsUser or not).
	p := filepath.Join(h.dir, "new.conf")
	must(t, WriteFile(ctx, tr, p, []byte("x\n"), WriteOptions{Mode: "0600"}))
	fi, err := os.Stat(p)
	must(t, err)
	if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != h.uid || fi.Mode().Perm() != 0o600 {
		t.Errorf("new file in the owner's directory: uid %d mode %v", st.Uid, fi.Mode())
	}

	// A link the owner put in place of a file: ReadFile reads as the
	// owner, who cannot read the root-only target.
	link := filepath.Join(h.dir, "link.conf")
	must(t, os.Symlink(h.secret, link))
	if b, err := ReadFile(ctx, tr, link, false); err == nil || bytes.Contains(b, []byte("TOPSECRET")) {
		t.Errorf("read through the owner's link: %q, %v", b, err)
	}
	// Writing over it replaces the link, never the secret.
	before := h.outside(t)
	if err := WriteFile(ctx, tr, link, []byte("y\n"), WriteOptions{}); err == nil {
		t.Errorf("wrote over a link to a root file the owner cannot give away")
	}
	h.assertSecretKept(t, before)

	// A root-owned directory anybody can write: nobody to act as, refused.
	open := filepath.Join(h.root, "open")
	must(t, os.Mkdir(open, 0o777))
	must(t, os.Chmod(open, 0o777))
	err = WriteFile(ctx, tr, filepath.Join(open, "f.conf"), []byte("x"), WriteOptions{})
	if err == nil || !strings.Contains(err.Error(), "refusing to act as root in "+open) {
		t.Errorf("write in a world-writable root directory: %v", err)
	}
	// ... unless the caller names the user (the cluster owner).
	must(t, WriteFile(ctx, tr, filepath.Join(open, "f.conf"), []byte("x"), WriteOptions{AsUser: raceUser}))

	// A root-only directory reached through the owner's directory is not
	// root's alone: the owner could swap it. Without a user, refused.
	inner := filepath.Join(h.dir, "rootdir")
	must(t, os.Mkdir(inner, 0o755))
	err = WriteFile(ctx, tr, filepath.Join(inner, "f.conf"), []byte("x"), WriteOptions{})
	if err == nil || !strings.Contains(err.Error(), "belongs to uid "+strconv.Itoa(h.uid)) {
		t.Errorf("write below the owner's directory: %v", err)
	}

	// A link in the chain, to a directory a third user owns (the owner
	// swapped a directory of theirs for it): not that user's to act as
	// (root would read, or restore a backup, as them: audit h119). Refused
	// without a user; with one (the cluster owner), as them.
	// The link sits above the file's own directory (a link as that
	// directory is refused by its type).
	link3 := filepath.Join(h.root, "via")
	must(t, os.Symlink(h.dir, link3))
	sub := filepath.Join(h.dir, "sub")
	must(t, os.Mkdir(sub, 0o755))
	must(t, os.Chown(sub, h.uid, h.gid))
	via := filepath.Join(link3, "sub")
	must(t, os.WriteFile(filepath.Join(sub, "x.conf"), []byte("x\n"), 0o644))
	if _, err := ReadFile(ctx, tr, filepath.Join(via, "x.conf"), false); err == nil || !strings.Contains(err.Error(), "refusing to act as root in "+via) {
		t.Errorf("read through a link to another user's directory: %v", err)
	}
	if err := WriteFile(ctx, tr, filepath.Join(via, "y.conf"), []byte("y\n"), WriteOptions{}); err == nil || !strings.Contains(err.Error(), "refusing to act as root in "+via) {
		t.Errorf("write through a link to another user's directory: %v", err)
	}
	if err := RemoveFile(ctx, tr, filepath.Join(via, "x.conf"), "", "", false); err == nil || !strings.Contains(err.Error(), "refusing to act as root in "+via) {
		t.Errorf("remove through a link to another user's directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(sub, "x.conf")); err != nil {
		t.Errorf("the file is gone: %v", err)
	}
	if b, err := ReadFileActing(ctx, tr, filepath.Join(via, "x.conf"), raceUser, false); err != nil || string(b) != "x\n" {
		t.Errorf("read through the link as %s: %q, %v", raceUser, b, err)
	}

	// MakeDir: in the owner's directory the owner makes it; in a
	// root-only one root makes it and hands it over with chown -h.
	for _, d := range []string{filepath.Join(h.dir, "conf.d"), filepath.Join(h.root, "etc", "conf.d")} {
		must(t, MakeDir(ctx, tr, d, raceUser, false))
		fi, err := os.Lstat(d)
		must(t, err)
		if st := fi.Sys().(*syscall.Stat_t); !fi.IsDir() || int(st.Uid) != h.uid || fi.Mode().Perm() != 0o755 {
			t.Errorf("MakeDir %s: uid %d mode %v", d, st.Uid, fi.Mode())
		}
		must(t, MakeDir(ctx, tr, d, raceUser, false)) // exists: nothing to do
	}
	// A link the owner put where the directory should be is left alone:
	// nothing is created or chowned through it.
	linked := filepath.Join(h.dir, "linked.d")
	must(t, os.Symlink(h.state, linked))
	must(t, MakeDir(ctx, tr, linked, raceUser, false))
	if fi, _ := os.Stat(h.state); fi.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Errorf("MakeDir chowned through the owner's link")
	}

	// Root-only directories (sticky /tmp above is fine) keep the root
	// write: owner root, mode as asked.
	rootOnly := filepath.Join(h.root, "etc", "sysctl.d", "10-x.conf")
	must(t, WriteFile(ctx, tr, rootOnly, []byte("vm.x = 1\n"), WriteOptions{Mode: "0644"}))
	fi, err = os.Stat(rootOnly)
	must(t, err)
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 0 || fi.Mode().Perm() != 0o644 {
		t.Errorf("root-only write: uid %d mode %v", st.Uid, fi.Mode())
	}
}

func TestCheckPath(t *testing.T) {
	for _, p := range []string{"", "rel/x", "/a/../b", "/a//b", "/", "/a/b/", "/a\x00b"} {
		if checkPath(p) == nil {
			t.Errorf("checkPath(%q) accepted", p)
		}
	}
	for _, p := range []string{"/etc/x.conf", "/a b/c'd"} {
		if err := checkPath(p); err != nil {
			t.Errorf("checkPath(%q): %v", p, err)
		}
	}
}
