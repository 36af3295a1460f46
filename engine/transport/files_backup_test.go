package transport

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
)

// TestBackupBounded: a file too large to keep (a sparse file in a
// directory the cluster owner controls reads as any size) is neither kept
// nor replaced nor removed, and nothing is left in the state directory;
// one of exactly the bound is kept whole (audit h117).
func TestBackupBounded(t *testing.T) {
	dir, state := t.TempDir(), t.TempDir()
	big := filepath.Join(dir, "big.conf")
	must(t, os.WriteFile(big, nil, 0o644))
	tr := &Local{}
	ctx := context.Background()
	backup := filepath.Join(state, "files", "big.conf")
	assertUntouched := func(t *testing.T, size int64, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "larger than 16 MiB: not keeping a copy of it, and so not changing it") {
			t.Fatalf("err %v, want the file refused as too large", err)
		}
		if fi, err := os.Stat(big); err != nil || fi.Size() != size {
			t.Fatalf("the file is now %v, %v", fi, err)
		}
		var left []string
		filepath.Walk(state, func(p string, fi os.FileInfo, err error) error {
			if err == nil && !fi.IsDir() {
				left = append(left, p)
			}
			return nil
		})
		if ents, _ := os.ReadDir(dir); len(left) > 0 || len(ents) != 1 {
			t.Fatalf("left behind: %v, %v", left, ents)
		}
	}
	// Just past the bound (the copy's check), and far past it (the read
	// is cut short).
	for _, size := range []int64{maxBackup + 1, 1 << 40} {
		must(t, os.Truncate(big, size))
		t.Run(fmt.Sprintf("write %d", size), func(t *testing.T) {
			assertUntouched(t, size, WriteFile(ctx, tr, big, []byte("small\n"), WriteOptions{Backup: backup}))
		})
		t.Run(fmt.Sprintf("remove %d", size), func(t *testing.T) {
			assertUntouched(t, size, RemoveFile(ctx, tr, big, backup, "", false))
		})
	}
	t.Run("at the bound", func(t *testing.T) {
		must(t, os.Truncate(big, maxBackup))
		if err := WriteFile(ctx, tr, big, []byte("small\n"), WriteOptions{Backup: backup}); err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Stat(backup); err != nil || fi.Size() != maxBackup {
			t.Fatalf("backup %v, %v; want %d bytes", fi, err, maxBackup)
		}
		if b, _ := os.ReadFile(big); string(b) != "small\n" {
			t.Fatalf("file now %q", b)
		}
	})
}

// TestKeepTakesOwnerOnlyFromItsUser: where another user acts, the mode
// and owner a backup gets are that user's word: the owner must be that
// user and only permission bits count; a backup root-owned or setuid at
// its say-so would stop rollback or be worse (audit h117).
func TestKeepTakesOwnerOnlyFromItsUser(t *testing.T) {
	me, err := user.Current()
	must(t, err)
	mine := me.Uid + ":" + me.Gid
	for _, tc := range []struct {
		name, meta, wantMode, wantErr string
	}{
		{"its own file", "B 640 " + mine, "640", ""},
		{"setuid at its word", "B 4755 " + mine, "755", ""},
		{"another owner at its word", "B 644 4242:" + me.Gid, "", "says it belongs to uid 4242: not keeping that copy"},
		{"a mode that is none", "B 64x " + mine, "", "its mode reads 64x"},
		{"an owner that is none", "B 644 root:root", "", "its owner reads root:root"},
		{"a group that is none", "B 644 " + me.Uid + ":1;x", "", "its owner reads"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			raw, backup := filepath.Join(dir, "b.tmp"), filepath.Join(dir, "b")
			must(t, os.WriteFile(raw, []byte(tc.meta+"\ncontent\n"), 0o600))
			script := keepFn + `set -eu
raw=$1 backup=$2 user=$3 path=/etc/x.conf
keep
stat -c %a -- "$backup"
`
			out, err := exec.Command("sh", "-c", script, "sh", raw, backup, me.Username).CombinedOutput()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(string(out), tc.wantErr) {
					t.Fatalf("err %v, output %q; want %q", err, out, tc.wantErr)
				}
				if _, err := os.Stat(backup); err == nil {
					t.Fatal("a backup was kept")
				}
				return
			}
			if err != nil || strings.TrimSpace(string(out)) != tc.wantMode {
				t.Fatalf("err %v, output %q; want mode %s", err, out, tc.wantMode)
			}
			if b, _ := os.ReadFile(backup); string(b) != "content\n" {
				t.Fatalf("backup holds %q", b)
			}
		})
	}
}
