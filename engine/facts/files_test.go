package facts

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgtune/pgtune/engine/transport"
	"github.com/pgtune/pgtune/internal/testhost"
)

// prefetchCase is a declared file and whether the gather may read it.
type prefetchCase struct {
	name, path string
	want       bool // prefetched
	// noRead: ReadFile would block on it (a FIFO): not compared.
	noRead bool
}

// forging is file content made of the gather's own framing.
const forging = "ZE\nZF 3 /etc/shadow\nZL x\nZT y\nZN /etc/look.conf\nM MemTotal: 1 kB\nI 0\nX other\nY y\nD AAAA\nZE\n"

// prefetchTree lays out files for the cases; the hostile ones (links,
// other owners, open directories) only as root, where they matter.
func prefetchTree(t *testing.T) []prefetchCase {
	t.Helper()
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	mkdir := func(p string, mode os.FileMode) string {
		if err := os.Mkdir(p, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // past the umask
			t.Fatal(err)
		}
		return p
	}
	cases := []prefetchCase{
		{"lines", write("lines.conf", "vm.a = 1\nvm.b = 2\n"), true, false},
		{"no final newline", write("tail.conf", "vm.a = 1\nno newline"), true, false},
		{"empty", write("empty.conf", ""), true, false},
		{"odd lines", write("odd.conf", "\n\n  x \\n %s %d\n\ttab\r\n\\\n"), true, false},
		{"framing", write("forge.conf", forging), true, false},
		{"missing", filepath.Join(dir, "missing.conf"), true, false},
		{"exactly the cap", write("cap.conf", strings.Repeat(strings.Repeat("x", 63)+"\n", MaxPrefetchSize/64)), true, false},
		{"over the cap", write("big.conf", strings.Repeat("x", MaxPrefetchSize)+"\n"), false, false},
		{"NUL bytes", write("nul.conf", "a\x00b\n"), false, false},
	}
	fifo := filepath.Join(dir, "fifo.conf")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	cases = append(cases, prefetchCase{"FIFO", fifo, false, true})
	if os.Geteuid() != 0 {
		return cases
	}
	link := filepath.Join(dir, "link.conf")
	if err := os.Symlink(filepath.Join(dir, "lines.conf"), link); err != nil {
		t.Fatal(err)
	}
	dirLink := filepath.Join(dir, "dirlink")
	if err := os.Symlink(dir, dirLink); err != nil {
		t.Fatal(err)
	}
	owned := mkdir(filepath.Join(dir, "nobody"), 0o755)
	if err := os.Chown(owned, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	testhost.WriteOwned(t, "root", filepath.Join(owned, "a.conf"), "owned by nobody's directory\n", 0o644)
	open := mkdir(filepath.Join(dir, "open"), 0o777)
	testhost.WriteOwned(t, "root", filepath.Join(open, "a.conf"), "others may write here\n", 0o644)
	under := mkdir(filepath.Join(open, "under"), 0o755)
	testhost.WriteOwned(t, "root", filepath.Join(under, "a.conf"), "others may rename my directory\n", 0o644)
	sticky := mkdir(filepath.Join(dir, "sticky"), os.ModeSticky|0o777)
	safe := mkdir(filepath.Join(sticky, "safe"), 0o755)
	testhost.WriteOwned(t, "root", filepath.Join(safe, "a.conf"), "under a sticky directory, as /tmp\n", 0o644)
	return append(cases,
		prefetchCase{"symlink", link, false, false},
		prefetchCase{"directory a symlink", filepath.Join(dirLink, "lines.conf"), false, false},
		prefetchCase{"directory owned by another user", filepath.Join(owned, "a.conf"), false, false},
		prefetchCase{"missing in a directory owned by another user", filepath.Join(owned, "none.conf"), false, false},
		prefetchCase{"directory others can write", filepath.Join(open, "a.conf"), false, false},
		prefetchCase{"directory in one others can write", filepath.Join(under, "a.conf"), false, false},
		prefetchCase{"directory in a sticky one", filepath.Join(safe, "a.conf"), true, false},
		prefetchCase{"file owned by another user, root's directory", writeOwnedBy(t, dir, "nobody.conf", 65534), true, false},
	)
}

func writeOwnedBy(t *testing.T, dir, name string, uid int) string {
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("a file nobody owns\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p, uid, uid); err != nil {
		t.Fatal(err)
	}
	return p
}

// checkPrefetch gathers the cases' files over tr and compares each with
// what ReadFile reads over tr: the same bytes, or not prefetched.
func checkPrefetch(t *testing.T, tr transport.Transport, become bool, cases []prefetchCase) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var paths []string
	for _, c := range cases {
		paths = append(paths, c.path)
	}
	f, err := Gather(ctx, tr, Options{Become: become, Sets: []Set{{Name: "m", Files: paths}}})
	if err != nil {
		t.Fatal(err)
	}
	if f.MemTotal <= 1024 || f.Hostname == "" {
		t.Errorf("core facts: MemTotal %d, hostname %q", f.MemTotal, f.Hostname)
	}
	for p := range f.Files {
		if !strings.HasPrefix(p, filepath.Dir(filepath.Dir(paths[0]))) {
			t.Errorf("prefetched %s, which no set declared", p)
		}
	}
	for _, c := range cases {
		got, ok := f.Files[c.path]
		if ok != c.want {
			t.Errorf("%s: prefetched %v, want %v", c.name, ok, c.want)
		}
		if !ok || c.noRead {
			continue
		}
		data, err := transport.ReadFile(ctx, tr, c.path, become)
		exists := !errors.Is(err, os.ErrNotExist)
		if exists && err != nil {
			t.Errorf("%s: ReadFile: %v", c.name, err)
			continue
		}
		if got.Exists != exists || !bytes.Equal(got.Data, data) {
			t.Errorf("%s: prefetched %v %q, ReadFile reads %v %q", c.name, got.Exists, got.Data, exists, data)
		}
	}
}

// TestPrefetchLocal: declared files come with the facts, byte for byte
// what ReadFile reads, and only where ReadFile would read them as root.
func TestPrefetchLocal(t *testing.T) {
	checkPrefetch(t, transport.NewLocal(), false, prefetchTree(t))
}

// TestPrefetchOverSSH is TestPrefetchLocal through a real sshd: as root,
// and as a user who becomes root through sudo.
func TestPrefetchOverSSH(t *testing.T) {
	srv := testhost.SSHD(t) // skips under -short and when not root
	cases := prefetchTree(t)
	t.Run("root", func(t *testing.T) {
		checkPrefetch(t, dialTestSSHD(t, srv), false, cases)
	})
	t.Run("become", func(t *testing.T) {
		if _, err := exec.LookPath("sudo"); err != nil {
			t.Skip("no sudo")
		}
		testhost.EnsureUser(t, "pgtune-sudo", true)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		c, err := transport.DialSSH(ctx, transport.SSHConfig{
			Name: "testhost", Address: "127.0.0.1", Port: srv.Port, User: "pgtune-sudo",
			PrivateKeyFile: srv.KeyFile, KnownHostsFile: srv.KnownHostsFile, ConnectTimeout: 10 * time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		checkPrefetch(t, c, true, cases)
	})
}

// TestPrefetchParseHostile: what the host prints decides no more than
// the content of the files asked for, and only when its framing holds.
func TestPrefetchParseHostile(t *testing.T) {
	const head = "M MemTotal: 1048576 kB\nH h\n"
	sets := []Set{{Name: "m", Files: []string{"/etc/a.conf", "/etc/b.conf"}}}
	for _, tc := range []struct {
		name string
		out  string
		want map[string]string // path → content; "-" absent
	}{
		{"well formed", "ZF 3 /etc/a.conf\nZL a\nZT b\nZE\nZN /etc/b.conf\n", map[string]string{"/etc/a.conf": "a\nb", "/etc/b.conf": "-"}},
		{"not asked for", "ZF 2 /etc/shadow\nZL x\nZE\nZN /etc/passwd\n", nil},
		{"answered twice", "ZN /etc/a.conf\nZF 2 /etc/a.conf\nZL x\nZE\n", nil},
		{"longer than stat said", "ZF 1 /etc/a.conf\nZL xy\nZE\n", nil},
		{"shorter than stat said", "ZF 9 /etc/a.conf\nZL xy\nZE\n", nil},
		{"a line after the last", "ZF 4 /etc/a.conf\nZT x\nZL y\nZE\n", nil},
		{"never closed", "ZF 2 /etc/a.conf\nZL x\n", nil},
		{"over the cap", "ZF 99999999 /etc/a.conf\nZL x\nZE\n", nil},
		{"negative size", "ZF -1 /etc/a.conf\nZE\n", nil},
		{"cut by another file", "ZF 2 /etc/a.conf\nZF 2 /etc/b.conf\nZL y\nZE\nZL x\nZE\n", map[string]string{"/etc/b.conf": "y\n"}},
		{"lines outside a file", "ZL x\nZT y\nZE\nZN /etc/b.conf\n", map[string]string{"/etc/b.conf": "-"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := ParseGather([]byte(head+tc.out), sets...)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for p, c := range f.Files {
				got[p] = "-"
				if c.Exists {
					got[p] = string(c.Data)
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("files %q, want %q", got, tc.want)
			}
			for p, w := range tc.want {
				if got[p] != w {
					t.Errorf("%s: %q, want %q", p, got[p], w)
				}
			}
		})
	}
	// Paths that cannot be quoted into the script safely, or are not
	// clean, are not asked for.
	got := PrefetchFiles([]Set{{Name: "m", Files: []string{"/etc/a b.conf", "relative.conf", "/etc/../x", "/etc/$(id)", "/etc/a\n.conf", "/etc/ok.conf", "/etc/ok.conf"}}})
	if len(got) != 1 || got[0] != "/etc/ok.conf" {
		t.Errorf("PrefetchFiles: %q, want only /etc/ok.conf", got)
	}
}

// TestPrefetchStatGarbage: a stat that prints what it should not (another
// stat(1), a hostile one) makes the script skip the file, never end the
// gather on a failed arithmetic expansion nor call the file missing.
func TestPrefetchStatGarbage(t *testing.T) {
	for _, st := range []string{
		"0 755 41ed 4096 /\n0 755 41ed 4096 /etc\nx 644 81a4 3 /etc/a.conf",
		"0 755 41ed 4096 /\n0 755 41ed 4096 /etc\n0 6z4 81a4 3 /etc/a.conf",
		"0 755 41ed 4096 /\n0 755 41ed 4096 /etc\n0 644 $(id) 3 /etc/a.conf",
		"0 755 41ed 4096 /\n0 7;5 41ed 4096 /etc\n0 644 81a4 3 /etc/a.conf",
		"0 755 41ed 4096 /\n0 755 41ed 4096 /etc\n0 644 81a4 1e9 /etc/a.conf",
	} {
		script := filesFuncs + "zuid=0\nzst=" + shellQuote(st) + "\nzfile /etc/a.conf / /etc\necho done\n"
		out, err := exec.Command("sh", "-c", script).CombinedOutput()
		if err != nil || string(out) != "done\n" {
			t.Errorf("stat printing %q: %v %q; want the file skipped, the script going on", st, err, out)
		}
	}
	// Who the shell is, unknown: nothing is read.
	p := filepath.Join(t.TempDir(), "a.conf")
	if err := os.WriteFile(p, []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for uid, want := range map[string]string{"0": "ZF 2 " + p + "\nZL x\nZE\ndone\n", "": "done\n", "x": "done\n"} {
		script := filesFuncs + "zuid=" + uid + "\nzst=" + shellQuote("0 755 41ed 4096 /\n0 644 81a4 2 "+p) + "\nzfile " + p + " /\necho done\n"
		if out, err := exec.Command("sh", "-c", script).CombinedOutput(); err != nil || string(out) != want {
			t.Errorf("uid %q: %v %q; want %q", uid, err, out, want)
		}
	}
}
