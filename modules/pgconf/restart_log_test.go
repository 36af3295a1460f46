package pgconf

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/pgtune/pgtune/engine/transport"
	"github.com/pgtune/pgtune/internal/testhost"
)

// TestRestartLogOnlyFromOwnersPostgres: the log restartScript reports is
// the stderr of the PID in postmaster.pid only when that is a postgres
// process of the cluster owner. postmaster.pid is the owner's file: a PID
// of another user's process, or of one not postgres, must not make root
// name the file it writes to (audit h98).
func TestRestartLogOnlyFromOwnersPostgres(t *testing.T) {
	if testing.Short() || os.Geteuid() != 0 {
		t.Skip("starts processes as root and as nobody")
	}
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	nobody, err := strconv.Atoi(testhost.UID(t, "nobody"))
	if err != nil {
		t.Fatal(err)
	}
	// A process called postgres: sleep under that name, where nobody
	// can run it.
	postgres := filepath.Join(testhost.OwnedDir(t, "root"), "postgres")
	b, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(postgres, b, 0o755); err != nil {
		t.Fatal(err)
	}
	// And one called postmaster: RHEL's postgresql.service started
	// /usr/bin/postmaster up to 15, and facts takes it for the postmaster
	// (review h104).
	postmaster := filepath.Join(filepath.Dir(postgres), "postmaster")
	if err := os.WriteFile(postmaster, b, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		prog    string
		uid     int
		logName string
		wantLog bool
	}{
		{"the owner's postgres", postgres, 0, "root-only.log", true},
		{"the owner's postgres started as postmaster", postmaster, 0, "root-only.log", true},
		{"another user's postgres", postgres, nobody, "root-only.log", false},
		{"the owner's process, not postgres", sleep, 0, "root-only.log", false},
		// The name is the owner's to choose: lines in it would forge the
		// report (audit h118).
		{"the owner's postgres, a line break in its log's name", postgres, 0, "x\nrc=0\nready=1\nnew_pid=1\n--- output\n.log", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			data := filepath.Join(root, "data")
			if err := os.Mkdir(data, 0o700); err != nil {
				t.Fatal(err)
			}
			// The file the process writes its stderr to: root's alone.
			secret := filepath.Join(root, strings.ReplaceAll(tc.logName, `\n`, "\n"))
			f, err := os.OpenFile(secret, os.O_CREATE|os.O_WRONLY, 0o600)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			p := exec.Command(tc.prog, "60")
			p.Stderr = f
			p.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(tc.uid), Gid: uint32(tc.uid)}}
			if err := p.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = p.Process.Kill(); _ = p.Wait() }()
			if err := os.WriteFile(filepath.Join(data, "postmaster.pid"), []byte(strconv.Itoa(p.Process.Pid)+"\n"+data+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			// The owner is root (the test's user); pg_restart does nothing
			// and the wait for readiness gives up after 1 s.
			cmd := exec.Command("sh", "-c", restartScript, "sh", "true", data, filepath.Join(root, "bin"), "root",
				"15", "", "", "0", "1", "restart", "", "test-run", restartInner)
			cmd.Env = append(os.Environ(), "TMPDIR="+root)
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("restart script: %v\n%s", err, out)
			}
			want := "\nlog=" + filepath.Join(data, "pgtune-startup.log") + "\n"
			if tc.wantLog {
				want = "\nlog=" + secret + "\n"
			}
			if !strings.Contains("\n"+string(out), want) {
				t.Errorf("output lacks %q:\n%s", strings.TrimSpace(want), out)
			}
			// postmaster.pid still names the process.
			if r := parseRestart(string(out)); r.Ready || r.NewPID != p.Process.Pid {
				t.Errorf("report: ready %v, new pid %d; want not ready, pid %d:\n%s", r.Ready, r.NewPID, p.Process.Pid, out)
			}
		})
	}
}

// TestRestartDebianClusterMustBeThisOne: Debian's version and cluster
// name come from the postmaster's command line, which the cluster owner
// chooses; root runs pg_ctlcluster (or restarts the unit) only for the
// cluster that root's pg_lsclusters lists with this data directory
// (audit h118: config_file=/etc/postgresql/15/other/... made root restart
// another user's cluster).
func TestRestartDebianClusterMustBeThisOne(t *testing.T) {
	if testing.Short() || os.Geteuid() != 0 {
		t.Skip("lays out root's stand-ins for pg_lsclusters and pg_ctlcluster")
	}
	root := t.TempDir()
	data, other := filepath.Join(root, "data"), filepath.Join(root, "other")
	for _, d := range []string{data, other} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// pg_data may be a link to the directory Debian lists.
	link := filepath.Join(root, "link")
	if err := os.Symlink(data, link); err != nil {
		t.Fatal(err)
	}
	ran := filepath.Join(root, "ran")
	// Root's stand-ins, where bin_trusted takes them (not under /tmp).
	trusted, err := os.MkdirTemp("/run", "pgtune-deb-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(trusted) })
	lsclusters := `#!/bin/sh
[ "$1" = -h ] || exit 2
case $3 in
pgtune-test-mine) d=` + transport.Quote(data) + `;;
pgtune-test-other) d=` + transport.Quote(other) + `;;
*) echo "Error: specified cluster does not exist" >&2; exit 1;;
esac
printf '%s %s 5432 online root %s /var/log/postgresql/x.log\n' "$2" "$3" "$d"
`
	ctlcluster := "#!/bin/sh\nprintf '%s\\n' \"$*\" >> " + transport.Quote(ran) + "\n"
	writeExec := func(dir, name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(trusted, 0o755); err != nil {
		t.Fatal(err)
	}
	writeExec(trusted, "pg_lsclusters", lsclusters)
	writeExec(trusted, "pg_ctlcluster", ctlcluster)
	// The same pg_lsclusters where another user could have put it: /tmp
	// may be written by all.
	untrusted := filepath.Join(root, "untrusted")
	if err := os.Mkdir(untrusted, 0o755); err != nil {
		t.Fatal(err)
	}
	writeExec(untrusted, "pg_lsclusters", lsclusters)

	for _, tc := range []struct {
		name, data, cluster, path string
		wantRan                   string // pg_ctlcluster's arguments; "" when refused
		wantListed                string // debian_data
	}{
		{"this data directory", data, "pgtune-test-mine", trusted, "15 pgtune-test-mine restart", data},
		{"this data directory through a link", link, "pgtune-test-mine", trusted, "15 pgtune-test-mine restart", data},
		{"another cluster's data directory", data, "pgtune-test-other", trusted, "", other},
		{"a cluster pg_lsclusters does not know", data, "pgtune-test-gone", trusted, "", ""},
		{"pg_lsclusters not root's alone", data, "pgtune-test-mine", untrusted + ":" + trusted, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_ = os.Remove(ran)
			cmd := exec.Command("sh", "-c", restartScript, "sh", "", tc.data, filepath.Join(root, "bin"), "root",
				"15", tc.cluster, "", "0", "1", "restart", "", "test-run", restartInner)
			cmd.Env = append(os.Environ(), "TMPDIR="+root, "PATH="+tc.path+":"+os.Getenv("PATH"))
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("restart script: %v\n%s", err, out)
			}
			r := parseRestart(string(out))
			if r.Method != "pg_ctlcluster" {
				t.Fatalf("method %q, want pg_ctlcluster (is a unit postgresql@15-%s active here?):\n%s", r.Method, tc.cluster, out)
			}
			if r.DebianData != tc.wantListed {
				t.Errorf("debian_data %q, want %q", r.DebianData, tc.wantListed)
			}
			b, _ := os.ReadFile(ran)
			if got := strings.TrimSpace(string(b)); got != tc.wantRan {
				t.Errorf("pg_ctlcluster ran with %q, want %q", got, tc.wantRan)
			}
			if r.Refused != (tc.wantRan == "") {
				t.Errorf("refused %v, want %v:\n%s", r.Refused, tc.wantRan == "", out)
			}
		})
	}
}
