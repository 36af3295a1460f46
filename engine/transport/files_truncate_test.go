package transport

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWriteFileShortStdin is a connection dropping mid-transfer: the write
// script gets less than the declared size on stdin. The target must keep
// its old content and no temporary file may be left behind.
func TestWriteFileShortStdin(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "managed.conf")
	if err := os.WriteFile(path, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tr := &Local{}
	for _, tc := range []struct {
		name  string
		stdin string
		size  string
	}{
		{"truncated", "vm.nr_huge", "22"},
		{"empty", "", "22"},
		{"longer than declared", "vm.nr_hugepages = 3013\nextra", "22"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tr.Run(context.Background(), Command{
				Args:  []string{"sh", "-c", writeScript, "sh", path, "", "", "", tc.size, "", prepScript, emitScript},
				Stdin: []byte(tc.stdin),
			})
			if err == nil || !strings.Contains(err.Error(), "left unchanged") {
				t.Fatalf("short write: err %v, want a refusal", err)
			}
			if b, _ := os.ReadFile(path); string(b) != "old\n" {
				t.Fatalf("target now %q, want the old content", b)
			}
			ents, _ := os.ReadDir(dir)
			if len(ents) != 1 {
				t.Fatalf("left behind: %v", ents)
			}
		})
	}
	// The full content with the right size goes through.
	if err := WriteFile(context.Background(), tr, path, []byte("vm.nr_hugepages = 3013\n"), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "vm.nr_hugepages = 3013\n" {
		t.Fatalf("after a full write: %q", b)
	}
}

func TestCommandStringCutsScripts(t *testing.T) {
	c := Command{Args: []string{"sh", "-c", "set -eu\npath=$1\nrm -- \"$path\"", "sh", "/etc/a b.conf", "two\nlines"}}
	want := `sh -c 'set -eu …' sh '/etc/a b.conf' 'two …'`
	if got := c.String(); got != want {
		t.Errorf("String() = %s, want %s", got, want)
	}
	if c.Args[2] != "set -eu\npath=$1\nrm -- \"$path\"" {
		t.Error("String changed the command")
	}
	if got := (Command{Args: []string{"test", "-e", "/x"}}).String(); got != "test -e /x" {
		t.Errorf("plain command: %s", got)
	}
}

// TestWriteNeedsItsBackup: when the backup cannot be made, the target is
// not replaced (rollback relies on "no backup: never replaced").
func TestWriteNeedsItsBackup(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "managed.conf")
	if err := os.WriteFile(path, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	blocker := filepath.Join(dir, "state")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	err := WriteFile(context.Background(), &Local{}, path, []byte("new\n"), WriteOptions{Backup: filepath.Join(blocker, "files", "managed.conf")})
	if err == nil {
		t.Fatal("write went through without its backup")
	}
	if b, _ := os.ReadFile(path); string(b) != "old\n" {
		t.Fatalf("target now %q", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Fatalf("left behind: %v", ents)
	}
}
