package transport

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestBackupNeverWrittenThroughLinks: names planted where a backup's
// temporaries go (a state directory someone else could write, audit h98)
// are replaced, never written, chmodded or chowned through.
func TestBackupNeverWrittenThroughLinks(t *testing.T) {
	for _, op := range []string{"write", "remove"} {
		t.Run(op, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "conf", "target.conf")
			backup := filepath.Join(dir, "state", "files", "target.conf")
			victim := filepath.Join(dir, "victim")
			for _, d := range []string{filepath.Dir(path), filepath.Dir(backup)} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(path, []byte("old\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(victim, []byte("root only\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{backup + ".tmp", backup + ".tmp.c"} {
				if err := os.Symlink(victim, name); err != nil {
					t.Fatal(err)
				}
			}
			var err error
			if op == "write" {
				err = WriteFile(context.Background(), NewLocal(), path, []byte("new\n"), WriteOptions{Backup: backup})
			} else {
				err = RemoveFile(context.Background(), NewLocal(), path, backup, "", false)
			}
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(victim)
			fi, serr := os.Stat(victim)
			if err != nil || serr != nil || string(b) != "root only\n" || fi.Mode().Perm() != 0o600 {
				t.Fatalf("victim %q mode %v (%v, %v): written through a planted link", b, fi.Mode().Perm(), err, serr)
			}
			if b, err := os.ReadFile(backup); err != nil || string(b) != "old\n" {
				t.Fatalf("backup %q, %v; want the old content", b, err)
			}
		})
	}
}
