package facts

import (
	"context"
	"errors"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine/transport"
	"github.com/pgtune/pgtune/internal/testhost"
)

// runBinScript runs one RunBinFn function on this machine: $1 owner,
// $2 trusted_dir, then the function's name and arguments; how PATH
// prints the word how_of sets.
const runBinScript = `owner=$1 trusted_dir=$2
shift 2
` + RunBinFn + `how() { how_of "$1" && echo "$rh_how"; }
"$@"`

func runBinFn(t *testing.T, owner, trustedDir string, args ...string) (string, int) {
	t.Helper()
	res, err := transport.NewLocal().Run(context.Background(), transport.Command{
		Args: append([]string{"sh", "-c", runBinScript, "sh", owner, trustedDir}, args...)})
	var xe *transport.ExitError
	if err != nil && !errors.As(err, &xe) {
		t.Fatal(err)
	}
	return strings.TrimSuffix(string(res.Stdout), "\n"), res.ExitCode
}

// trustTree lays out, in a root-owned 0755 directory under /run (/tmp is
// writable by everyone, so nothing under it can be trusted):
//
//	ok/bin/postgres        root 0755 in root 0755 dirs: trusted
//	ok/bin/gw              root 0775: group may write
//	ok/bin/ow              root 0757: others may write
//	ok/bin/nobodys         owned by nobody
//	gwdir/postgres         root 0755 in a 0775 directory
//	nobodydir/postgres     root 0755 in a directory nobody owns
//	ok/bin/link            → ok/bin/postgres (trusted: the real file is)
//	ok/bin/tolink          → nobodydir/postgres
//	nobodydir/link         → ok/bin/postgres (trusted: the link's own
//	                         directory does not matter, its target is run)
func trustTree(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: lays out root- and nobody-owned files")
	}
	root, err := os.MkdirTemp("/run", "pgtune-trust-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(nobody.Uid)
	mk := func(p string, mode os.FileMode, dir bool, owner int) {
		t.Helper()
		p = filepath.Join(root, p)
		if dir {
			err = os.MkdirAll(p, mode)
		} else {
			err = os.WriteFile(p, []byte("#!/bin/sh\nid -u\n"), mode)
		}
		if err == nil {
			err = os.Chmod(p, mode)
		}
		if err == nil {
			err = os.Chown(p, owner, -1)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	mk("ok/bin", 0o755, true, 0)
	mk("ok/bin/postgres", 0o755, false, 0)
	mk("ok/bin/gw", 0o775, false, 0)
	mk("ok/bin/ow", 0o757, false, 0)
	mk("ok/bin/nobodys", 0o755, false, uid)
	mk("gwdir", 0o775, true, 0)
	mk("gwdir/postgres", 0o755, false, 0)
	mk("nobodydir", 0o755, true, uid)
	mk("nobodydir/postgres", 0o755, false, 0)
	for link, target := range map[string]string{
		"ok/bin/link": "postgres", "ok/bin/tolink": "../../nobodydir/postgres", "nobodydir/link": "../ok/bin/postgres",
	} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestBinTrusted(t *testing.T) {
	root := trustTree(t)
	real := filepath.Join(root, "ok/bin/postgres")
	tests := []struct {
		path string
		want string // the real path printed; "" when not trusted
	}{
		{"ok/bin/postgres", real},
		{"ok/bin/link", real},
		{"nobodydir/link", real},
		{"ok/bin/gw", ""},
		{"ok/bin/ow", ""},
		{"ok/bin/nobodys", ""},
		{"gwdir/postgres", ""},
		{"nobodydir/postgres", ""},
		{"ok/bin/tolink", ""},
		{"ok/bin/missing", ""},
		{"ok/bin", ""}, // a directory
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			out, code := runBinFn(t, "", "", "bin_trusted", filepath.Join(root, tc.path))
			if tc.want == "" && (code == 0 || out != "") {
				t.Errorf("trusted (%q, status %d)", out, code)
			}
			if tc.want != "" && (code != 0 || out != tc.want) {
				t.Errorf("got %q status %d; want %q", out, code, tc.want)
			}
		})
	}
	// The machine's own PostgreSQL is root's.
	if out, code := runBinFn(t, "", "", "bin_trusted", testhost.DefaultPGBin+"/postgres"); code != 0 || out != testhost.DefaultPGBin+"/postgres" {
		t.Errorf("%s/postgres not trusted: %q %d", testhost.DefaultPGBin, out, code)
	}
}

// run_bin runs a binary as the owner whenever it can, as root only when
// the binary is trusted, and refuses otherwise; each case runs `id -u`.
func TestRunBin(t *testing.T) {
	root := trustTree(t)
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, owner, trustedDir, bin string
		how, uid                     string // uid "" when refused
	}{
		{"owner, trusted binary", "nobody", "", "ok/bin/postgres", "owner", nobody.Uid},
		{"owner, binary others may write", "nobody", "", "ok/bin/ow", "owner", nobody.Uid},
		{"owner root, trusted binary", "root", "", "ok/bin/postgres", "trusted", "0"},
		{"owner root, untrusted binary", "root", "", "nobodydir/postgres", "", ""},
		{"unknown owner, untrusted binary", "no-such-user-pgtune", "", "ok/bin/gw", "", ""},
		{"unknown owner, trusted link", "", "", "nobodydir/link", "trusted", "0"},
		{"inventory pg_bin", "root", filepath.Join(root, "nobodydir"), "nobodydir/postgres", "self", "0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bin := filepath.Join(root, tc.bin)
			how, code := runBinFn(t, tc.owner, tc.trustedDir, "how", bin)
			if how != tc.how || (code == 0) != (tc.how != "") {
				t.Errorf("how_of: %q (status %d); want %q", how, code, tc.how)
			}
			uid, code := runBinFn(t, tc.owner, tc.trustedDir, "run_bin", bin)
			switch {
			case tc.uid == "" && code != 126:
				t.Errorf("run_bin ran it (%q, status %d); want refused", uid, code)
			case tc.uid != "" && (code != 0 || uid != tc.uid):
				t.Errorf("run_bin: uid %q status %d; want uid %s", uid, code, tc.uid)
			}
		})
	}
}
