package pgconf

import (
	"fmt"
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

// TestReadScriptOneStat: the configuration read asks stat once for all
// the readable files (their modes and owners, each its own), so that a
// file more costs the host its base64 alone. Counted in a PID namespace.
func TestReadScriptOneStat(t *testing.T) {
	if testing.Short() {
		t.Skip("counts processes in a PID namespace (root)")
	}
	ns := testhost.NewPIDNamespace(t)
	dir := t.TempDir()
	var files []string
	for i, mode := range []os.FileMode{0o600, 0o640, 0o644, 0o604} {
		p := filepath.Join(dir, fmt.Sprintf("f%d.conf", i))
		if err := os.WriteFile(p, []byte(fmt.Sprintf("x = %d\n", i)), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // past the umask
			t.Fatal(err)
		}
		files = append(files, p)
	}
	// read runs readScript on files (and a missing file and directory
	// between them): the processes it started and the records it printed.
	read := func(files []string) (int, *confFS) {
		args := []string{"f:" + filepath.Join(dir, "missing.conf")}
		for _, f := range files {
			args = append(args, "f:"+f, "d:"+filepath.Join(dir, "nodir"))
		}
		first := ns.NextPID(t)
		out, err := ns.Command(append([]string{"sh", "-c", readScript, "sh"}, args...)...).Output()
		if err != nil {
			t.Fatalf("readScript: %v", err)
		}
		started := ns.NextPID(t) - 1 - first
		fs := newConfFS()
		if _, err := parseRead(out, args, fs); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		return started, fs
	}
	one, _ := read(files[:1])
	all, fs := read(files)
	// Each file more: its base64, no stat.
	if more := all - one; more != len(files)-1 {
		t.Errorf("%d files started %d processes more than one; want %d (a base64 each)", len(files), more, len(files)-1)
	}
	for _, p := range files {
		f := fs.Files[p]
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		sys := st.Sys().(*syscall.Stat_t)
		u, err1 := user.LookupId(strconv.Itoa(int(sys.Uid)))
		g, err2 := user.LookupGroupId(strconv.Itoa(int(sys.Gid)))
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		want := fmt.Sprintf("%o %s %s", st.Mode().Perm(), u.Username, g.Name)
		if f == nil || !f.Exists || fmt.Sprintf("%s %s %s", f.Mode, f.Owner, f.Group) != want {
			t.Errorf("%s: read as %+v; want %s", p, f, want)
			continue
		}
		if data, _ := os.ReadFile(p); string(f.Content) != string(data) {
			t.Errorf("%s: content %q, want %q", p, f.Content, data)
		}
	}
	if f := fs.Files[filepath.Join(dir, "missing.conf")]; f == nil || f.Exists {
		t.Errorf("missing.conf read as %+v", f)
	}
}

// TestReadScriptStatFallback: when the one stat cannot answer for every
// file (one went between the test and the stat), each file asks on its
// own: the others' modes stand. A PATH whose stat fails on a name stands
// in for the race.
func TestReadScriptStatFallback(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	real, err := exec.LookPath("stat")
	if err != nil {
		t.Fatal(err)
	}
	// This stat fails, printing nothing for it, when asked for several
	// files one of which is gone.conf: as the real one does for a file
	// removed meanwhile.
	fake := "#!/bin/sh\nfor a do case $a in *gone.conf) [ $# -gt 6 ] && exec " + real + " \"$@\" /nonexistent 2>/dev/null;; esac; done\nexec " + real + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "stat"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	var args []string
	for _, n := range []string{"a.conf", "gone.conf", "b.conf"} {
		p := filepath.Join(dir, n)
		if err := os.WriteFile(p, []byte(n+"\n"), 0o640); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, 0o640); err != nil {
			t.Fatal(err)
		}
		args = append(args, "f:"+p)
	}
	cmd := exec.Command("sh", append([]string{"-c", readScript, "sh"}, args...)...)
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("readScript: %v", err)
	}
	fs := newConfFS()
	if _, err := parseRead(out, args, fs); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, a := range args {
		if f := fs.Files[a[2:]]; f == nil || f.Mode != "640" || !strings.HasSuffix(string(f.Content), ".conf\n") {
			t.Errorf("%s: read as %+v", a[2:], f)
		}
	}
}
