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

// TestRestartDebianUnitMustBeThisOne: Debian's version and cluster name
// come from the postmaster's command line, which the cluster owner
// chooses (config_file=/etc/postgresql/15/other/...): root restarts the
// unit they name only when its main process is this cluster's postmaster,
// starts an inactive one only for a server that is down and that root's
// pg_lsclusters lists with this data directory, and otherwise runs
// pg_ctlcluster as the owner (audit h118, review h120). Each case runs in
// a PID namespace of its own whose PID 1 is named systemd or init, with
// root's stand-ins for systemctl, pg_lsclusters and pg_ctlcluster, and a
// postmaster stand-in run by nobody.
func TestRestartDebianUnitMustBeThisOne(t *testing.T) {
	if testing.Short() || os.Geteuid() != 0 {
		t.Skip("needs root: PID namespaces, stand-ins root owns, a process of nobody")
	}
	for _, bin := range []string{"unshare", "setpriv", "runuser"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s: %v (util-linux)", bin, err)
		}
	}
	bins, err := os.MkdirTemp("/run", "pgtune-deb-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(bins) })
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Chmod(bins, 0o755))
	copyExec := func(from, to string) {
		t.Helper()
		b, err := os.ReadFile(from)
		must(err)
		must(os.WriteFile(to, b, 0o755))
	}
	sh, err := exec.LookPath("sh")
	must(err)
	sleep, err := exec.LookPath("sleep")
	must(err)
	// PID 1 of each namespace: a shell named as the init system.
	copyExec(sh, filepath.Join(bins, "systemd"))
	copyExec(sh, filepath.Join(bins, "init"))
	copyExec(sleep, filepath.Join(bins, "postgres"))

	// Under /run, where nobody may reach it (t.TempDir's parent is 0700).
	root := filepath.Join(bins, "work")
	must(os.Mkdir(root, 0o755))
	state := filepath.Join(root, "state") // what the stand-ins are told and record
	must(os.Mkdir(state, 0o777))
	must(os.Chmod(state, 0o777))
	data, other := filepath.Join(root, "data"), filepath.Join(root, "other")
	nobody := testhost.UID(t, "nobody")
	for _, d := range []string{data, other} {
		must(os.Mkdir(d, 0o755))
		must(exec.Command("chown", nobody, d).Run())
	}
	// Another user's stopped cluster, and the owner's link to it in
	// place of its data directory (review h121).
	bobs := filepath.Join(root, "bobs")
	must(os.Mkdir(bobs, 0o755))
	must(exec.Command("chown", testhost.UID(t, "daemon"), bobs).Run())
	toBobs := filepath.Join(root, "to-bobs")
	must(os.Symlink(bobs, toBobs))
	// pg_lsclusters lists every cluster whatever it is asked, another's
	// first: the script must pick its line by version and name.
	lsclusters := "#!/bin/sh\nprintf '15 pgtune-other 5433 online nobody %s /var/log/postgresql/o.log\\n15 pgtune-mine 5432 down nobody %s /var/log/postgresql/m.log\\n' " +
		transport.Quote(other) + " \"$(cat " + transport.Quote(state) + "/listed)\"\n"
	systemctl := "#!/bin/sh\nS=" + transport.Quote(state) + `
case $1 in
is-active) [ -e "$S/active" ];;
show) printf 'MainPID=%s\n' "$(cat "$S/mainpid")";;
restart) echo "systemctl restart $2" >> "$S/ran";;
*) exit 1;;
esac
`
	ctlcluster := "#!/bin/sh\necho \"pg_ctlcluster $* as $(id -un)\" >> " + transport.Quote(state) + "/ran\n"
	trusted := filepath.Join(bins, "bin")
	must(os.Mkdir(trusted, 0o755))
	for name, body := range map[string]string{"pg_lsclusters": lsclusters, "systemctl": systemctl, "pg_ctlcluster": ctlcluster} {
		must(os.WriteFile(filepath.Join(trusted, name), []byte(body), 0o755))
	}
	// The same pg_lsclusters where another user may change it.
	untrusted := filepath.Join(root, "untrusted")
	must(os.Mkdir(untrusted, 0o777))
	must(os.Chmod(untrusted, 0o777))
	must(os.WriteFile(filepath.Join(untrusted, "pg_lsclusters"), []byte(lsclusters), 0o755))

	// wrapper, PID 1: starts nobody's postmaster stand-in when asked
	// (postmaster.pid names it; the unit's main process is it, or PID 1,
	// as asked), then runs the restart script.
	wrapper := `st=$1 data=$2 running=$3 main=$4 postgres=$5 nobody=$6
shift 6
if [ "$running" = 1 ]; then
  setpriv --reuid="$nobody" --regid="$nobody" --clear-groups "$postgres" 600 &
  echo "$!" > "$data/postmaster.pid"
  chmod 644 "$data/postmaster.pid"
  if [ "$main" = postmaster ]; then echo "$!" > "$st/mainpid"; else echo 1 > "$st/mainpid"; fi
fi
sh -c "$@"
`
	for _, tc := range []struct {
		name       string
		data       string // "" for data
		init       string // PID 1's name
		active     bool   // the unit is active
		running    bool   // nobody's postmaster stand-in runs
		main       string // the unit's main process: "postmaster" or PID 1
		listed     string // the data directory pg_lsclusters lists for pgtune-mine
		path       string // ahead of the stand-ins' directory
		wantRan    string // the command run; "" when refused
		wantRefuse string
	}{
		{"active unit running this postmaster", "", "systemd", true, true, "postmaster", data, "", "systemctl restart postgresql@15-pgtune-mine", ""},
		{"active unit running another process", "", "systemd", true, true, "1", data, "", "", "unit"},
		{"active unit, this server's postmaster.pid gone", "", "systemd", true, false, "1", data, "", "", "unit"},
		{"inactive unit, server down, listed here", "", "systemd", false, false, "", data, "", "systemctl restart postgresql@15-pgtune-mine", ""},
		{"inactive unit, server down, listed elsewhere", "", "systemd", false, false, "", other, "", "", "debian"},
		{"inactive unit, server down, pg_lsclusters not root's", "", "systemd", false, false, "", data, untrusted, "", "debian"},
		{"inactive unit, server running outside it", "", "systemd", false, true, "", other, "", "pg_ctlcluster 15 pgtune-mine restart as nobody", ""},
		{"no systemd, server running", "", "init", false, true, "", other, "", "pg_ctlcluster 15 pgtune-mine restart as nobody", ""},
		{"no systemd, server down", "", "init", false, false, "", other, "", "pg_ctlcluster 15 pgtune-mine restart as nobody", ""},
		{"inactive unit, server down, data a link to another user's cluster listed so", toBobs, "systemd", false, false, "", bobs, "", "", "debian"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, f := range []string{"ran", "active", "mainpid", "listed", "../data/postmaster.pid"} {
				_ = os.Remove(filepath.Join(state, f))
			}
			must(os.WriteFile(filepath.Join(state, "ran"), nil, 0o666))
			must(os.Chmod(filepath.Join(state, "ran"), 0o666))
			must(os.WriteFile(filepath.Join(state, "listed"), []byte(tc.listed), 0o644))
			if tc.active {
				must(os.WriteFile(filepath.Join(state, "active"), nil, 0o644))
			}
			dataDir := data
			if tc.data != "" {
				dataDir = tc.data
			}
			running := "0"
			if tc.running {
				running = "1"
			}
			path := trusted + ":" + os.Getenv("PATH")
			if tc.path != "" {
				path = tc.path + ":" + path
			}
			cmd := exec.Command("unshare", "-p", "-f", "-m", "--mount-proc", filepath.Join(bins, tc.init), "-c", wrapper, "sh",
				state, dataDir, running, tc.main, filepath.Join(bins, "postgres"), nobody,
				restartScript, "sh", "", dataDir, filepath.Join(root, "bin"), "nobody",
				"15", "pgtune-mine", "", "0", "1", "restart", "", "test-run", restartInner)
			cmd.Env = append(os.Environ(), "TMPDIR="+root, "PATH="+path)
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("restart script: %v\n%s", err, out)
			}
			r := parseRestart(string(out))
			b, _ := os.ReadFile(filepath.Join(state, "ran"))
			if got := strings.TrimSpace(string(b)); got != tc.wantRan {
				t.Errorf("ran %q, want %q:\n%s", got, tc.wantRan, out)
			}
			if r.Refused != tc.wantRefuse {
				t.Errorf("refused %q, want %q:\n%s", r.Refused, tc.wantRefuse, out)
			}
			if tc.wantRefuse == "debian" && tc.path == "" && r.DebianData != tc.listed {
				t.Errorf("debian_data %q, want %q (the line of pgtune-mine)", r.DebianData, tc.listed)
			}
		})
	}
}
