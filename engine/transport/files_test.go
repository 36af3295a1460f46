package transport

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// testFileOps runs the file helpers against a transport: every case on the
// local one, the cases marked remote over the real sshd (each helper call
// is a session there, slow on a busy CI box).
func testFileOps(t *testing.T, tr Transport, dir string, become, remote bool) {
	ctx := context.Background()
	own := fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid())
	tests := []struct {
		name      string
		existing  *string // content before, nil: absent
		startMode os.FileMode
		opts      WriteOptions
		wantMode  os.FileMode
		backup    bool
		remote    bool
	}{
		{name: "new file gets 0644", wantMode: 0o644},
		{name: "new file explicit mode", opts: WriteOptions{Mode: "0600"}, wantMode: 0o600},
		{name: "replace keeps mode", existing: ptr("old\n"), startMode: 0o640, wantMode: 0o640},
		{name: "replace with explicit mode and owner", existing: ptr("old\n"), startMode: 0o600, opts: WriteOptions{Mode: "0644", Owner: own}, wantMode: 0o644},
		{name: "replace with backup", existing: ptr("old content\n"), startMode: 0o600, wantMode: 0o600, backup: true, remote: true},
		{name: "hostile name; $(touch owned) `id` 'q'", existing: ptr("x"), startMode: 0o644, wantMode: 0o644, backup: true, remote: true},
		{name: "new file in missing directory", opts: WriteOptions{Mode: "0640"}, wantMode: 0o640, remote: true},
	}
	for i, tc := range tests {
		if remote && !tc.remote {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, fmt.Sprintf("case%d", i), tc.name)
			if !strings.Contains(tc.name, "missing directory") {
				os.MkdirAll(filepath.Dir(path), 0o755)
			}
			if tc.existing != nil {
				if err := os.WriteFile(path, []byte(*tc.existing), tc.startMode); err != nil {
					t.Fatal(err)
				}
				os.Chmod(path, tc.startMode)
			}
			opts := tc.opts
			opts.Become = become
			if tc.backup {
				opts.Backup = filepath.Join(dir, "backups", fmt.Sprintf("case%d", i), "orig")
			}
			data := []byte("new content\nline two with 'quotes' and $(dollar)\n")
			if err := WriteFile(ctx, tr, path, data, opts); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != tc.wantMode {
				t.Errorf("mode = %o, want %o", fi.Mode().Perm(), tc.wantMode)
			}
			st := fi.Sys().(*syscall.Stat_t)
			if int(st.Uid) != os.Getuid() {
				t.Errorf("owner uid = %d", st.Uid)
			}
			got, err := ReadFile(ctx, tr, path, become)
			if err != nil || string(got) != string(data) {
				t.Errorf("ReadFile = %q, %v", got, err)
			}
			if tc.backup {
				b, err := os.ReadFile(opts.Backup)
				if err != nil || string(b) != *tc.existing {
					t.Errorf("backup = %q, %v; want %q", b, err, *tc.existing)
				}
				if bi, _ := os.Stat(opts.Backup); bi == nil || bi.Mode().Perm() != tc.startMode {
					t.Errorf("backup mode not kept")
				}
			}
			// No temporary file left behind.
			entries, _ := os.ReadDir(filepath.Dir(path))
			for _, e := range entries {
				if strings.HasPrefix(e.Name(), ".pgtune-") {
					t.Errorf("stray temporary %s", e.Name())
				}
			}
			// Remove with a backup, then again: missing is fine.
			bk := filepath.Join(dir, "removed", fmt.Sprintf("case%d", i))
			if err := RemoveFile(ctx, tr, path, bk, "", become); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(path); !os.IsNotExist(err) {
				t.Errorf("still there after RemoveFile: %v", err)
			}
			if b, _ := os.ReadFile(bk); string(b) != string(data) {
				t.Errorf("remove backup = %q", b)
			}
			if err := RemoveFile(ctx, tr, path, "", "", become); err != nil {
				t.Errorf("second RemoveFile: %v", err)
			}
			if _, err := ReadFile(ctx, tr, path, become); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("ReadFile of removed file: %v, want os.ErrNotExist", err)
			}
		})
	}
	if _, err := os.Stat("owned"); err == nil {
		t.Fatal("a file name was executed as shell")
	}
	// An empty write is a real empty file, not an error.
	p := filepath.Join(dir, "empty")
	if err := WriteFile(ctx, tr, p, nil, WriteOptions{Become: become}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(p); err != nil || fi.Size() != 0 {
		t.Errorf("empty write: %v %v", fi, err)
	}
	// Writing where a directory cannot be made fails with context.
	err := WriteFile(ctx, tr, "/proc/pgtune-nope/x", []byte("x"), WriteOptions{Become: become})
	if err == nil || !strings.Contains(err.Error(), "write /proc/pgtune-nope/x") {
		t.Errorf("write under /proc: %v", err)
	}
}

func ptr(s string) *string { return &s }

func TestFilesLocal(t *testing.T) {
	testFileOps(t, NewLocal(), t.TempDir(), false, false)
}
