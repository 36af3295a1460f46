package transport

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestReadFileAs: a read as a user gets only what that user may read,
// even where root would act itself (a root-only directory): the path is
// a host's word (Patroni's config, from a command line the cluster owner
// controls) and must not make root read another user's file for it
// (audit h119).
func TestReadFileAs(t *testing.T) {
	h := newHostileDir(t)
	ctx := context.Background()
	tr := &Local{}
	// The root-only secret beside a file the race user may read, in a
	// directory only root may change.
	readable := filepath.Join(h.root, "readable.yml")
	must(t, os.WriteFile(readable, []byte("scope: a\n"), 0o644))
	if b, err := ReadFile(ctx, tr, h.secret, false); err != nil || string(b) != secretText {
		t.Fatalf("root's own read: %q, %v", b, err)
	}
	if b, err := ReadFileAs(ctx, tr, h.secret, raceUser, false); err == nil || strings.Contains(string(b), "TOPSECRET") || strings.Contains(err.Error(), "TOPSECRET") {
		t.Fatalf("read as %s: %q, %v; want refused", raceUser, b, err)
	}
	if b, err := ReadFileAs(ctx, tr, readable, raceUser, false); err != nil || string(b) != "scope: a\n" {
		t.Fatalf("read as %s of a file it may read: %q, %v", raceUser, b, err)
	}
	if _, err := ReadFileAs(ctx, tr, filepath.Join(h.root, "missing.yml"), raceUser, false); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v, want ErrNotExist", err)
	}
	// Through a link the user made in its directory: still as the user.
	link := filepath.Join(h.dir, "patroni.yml")
	must(t, os.Symlink(h.secret, link))
	if b, err := ReadFileAs(ctx, tr, link, raceUser, false); err == nil || strings.Contains(string(b), "TOPSECRET") {
		t.Fatalf("read as %s through its link: %q, %v; want refused", raceUser, b, err)
	}
}

// TestWriteOwnedBy: with OwnedBy, the file replaced must be a regular
// file of that user: root, acting itself in a root-only directory,
// rewrites only what that user could (audit h119).
func TestWriteOwnedBy(t *testing.T) {
	h := newHostileDir(t)
	ctx := context.Background()
	tr := &Local{}
	mine := filepath.Join(h.root, "mine.yml")
	must(t, os.WriteFile(mine, []byte("old\n"), 0o640))
	must(t, os.Chown(mine, h.uid, h.gid))
	rootsLink := filepath.Join(h.root, "link.yml")
	must(t, os.Symlink(mine, rootsLink))
	before := h.outside(t)
	for _, tc := range []struct {
		name, path, want string
	}{
		{"root's file", h.secret, "belongs to root, not " + raceUser + ": not replacing it"},
		{"a link to the user's file", rootsLink, "is not a regular file: not replacing it"},
		{"no file", filepath.Join(h.root, "new.yml"), "is not a regular file: not replacing it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := WriteFile(ctx, tr, tc.path, []byte("new\n"), WriteOptions{AsUser: raceUser, OwnedBy: raceUser, Backup: filepath.Join(h.state, "b")})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
	h.assertSecretKept(t, before)
	if _, err := os.Lstat(filepath.Join(h.root, "new.yml")); err == nil {
		t.Fatal("a file was made")
	}
	// The user's own file is replaced, and stays the user's.
	if err := WriteFile(ctx, tr, mine, []byte("new\n"), WriteOptions{AsUser: raceUser, OwnedBy: raceUser}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(mine)
	must(t, err)
	if b, _ := os.ReadFile(mine); string(b) != "new\n" || fi.Sys().(*syscall.Stat_t).Uid != uint32(h.uid) || fi.Mode().Perm() != 0o640 {
		t.Fatalf("the user's file now %q, %v, uid %d", b, fi.Mode(), fi.Sys().(*syscall.Stat_t).Uid)
	}
}
