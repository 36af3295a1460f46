package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgtune/pgtune/internal/testhost"
)

// TestKilledMidApply kills the controller — a real pgtune process driving
// this machine through a real sshd, a real PostgreSQL 15 and the real
// kernel — in the middle of apply: with SIGKILL right after the huge page
// file is written, then with SIGTERM followed by SIGKILL while postgres is
// down inside its restart. After each kill no managed file is half
// written, no temporary is left, and postgres is running (the restart,
// once begun, completes on the host without the controller). The next
// apply converges and verifies, and check then finds the host in policy.
func TestKilledMidApply(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: real sshd, PostgreSQL and kernel")
	}
	start := time.Now()
	bin := buildPgtune(t)
	// The servers first, the kernel lock after: building them needs no
	// lock (others' kernel tests need not wait on it), and StopOnCleanup
	// stops postgres before the lock goes.
	sshd := testhost.SSHD(t)
	pg := testhost.Postgres(t)
	kernel := testhost.LockKernel(t)
	testhost.StopOnCleanup(t, pg)
	t.Logf("%s: built, sshd and postgres up, locked", time.Since(start))
	work := t.TempDir()
	sysctlDir := filepath.Join(work, "sysctl.d")
	stateDir := filepath.Join(work, "state")
	flag := filepath.Join(work, "postgres-down")
	hook := restartHook(t, work, pg, flag, 3)

	inv := filepath.Join(work, "inventory.yml")
	writeFile(t, inv, "all:\n  children:\n    postgres:\n      hosts:\n"+sshdHost("db1", sshd,
		"pg_data: "+pg.DataDir, "pg_bin: "+pg.BinDir, "pg_restart: sh "+hook)+
		fmt.Sprintf("      vars:\n        sysctl_dir: %s\n        pgtune_state_dir: %s\n", sysctlDir, stateDir))
	// Room for 128 MiB beside what the pool holds (one page of a larger
	// default size), the cluster sized to that share; neither preflight's
	// verdict is left to this machine's free memory.
	pool, share := kernel.RoomFor(128 << 20)
	book := filepath.Join(work, "memory.yml")
	writeFile(t, book, fmt.Sprintf(`- name: memory policy under test
  hosts: postgres
  policy:
    hugepages:
      pool: %d
      min_available: 0
      sysctl_file: "${vars.sysctl_dir}/10-hugepages.conf"
    pgconf:
      restart: true
      pool: %d
    overcommit:
      ratio: 0.8
      headroom: "${8 * GiB}"
      max_committed: 1
      # far above what this shared machine commits, hence not protective
      accept_unprotective: true
      sysctl_file: "${vars.sysctl_dir}/99-overcommit.conf"
`, pool, share))

	code, planned, stderr := pgtune(t, "check", "-i", inv, book)
	if code != 2 {
		t.Fatalf("check: exit %d, want 2\n%s", code, stderr)
	}
	t.Logf("%s: checked", time.Since(start))
	files := managedFiles(planned)
	if len(files) < 3 {
		t.Fatalf("plan writes %d files, want the two sysctl files and the drop-in: %v", len(files), changeSet(planned.Hosts[0].Changes))
	}
	dirs := []string{sysctlDir, pg.DataDir}
	firstPID := pg.PID(t)
	args := []string{"apply", "--yes", "-i", inv, book}

	t.Run("SIGKILL after the huge page file is written", func(t *testing.T) {
		p := startPgtune(t, bin, args...)
		waitFor(t, "10-hugepages.conf", p, sysctlDir, func() bool { return exists(filepath.Join(sysctlDir, "10-hugepages.conf")) })
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
		checkWhole(t, files, dirs...)
		if pid := waitPostgresUp(t, pg); pid != firstPID {
			t.Errorf("postgres was restarted (pid %d → %d) before pgconf ran", firstPID, pid)
		}
	})

	t.Run("SIGTERM then SIGKILL while postgres is down", func(t *testing.T) {
		before := restartTemps()
		p := startPgtune(t, bin, args...)
		waitFor(t, "the restart hook's stop", p, filepath.Dir(flag), func() bool { return exists(flag) })
		if pg.Running() {
			t.Fatal("the hook signalled before postgres was down")
		}
		if len(newNames(restartTemps(), before)) == 0 {
			t.Error("no /tmp/pgtune-restart.* file while the restart runs: the check of their removal below would hold whatever happened to them")
		}
		// SIGTERM cancels the run (pgtune kills its remote commands);
		// the SIGKILL a second later ends pgtune before it can do
		// anything about the restart. The restart must finish anyway.
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		time.Sleep(time.Second)
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
		pid := waitPostgresUp(t, pg)
		if pid == firstPID {
			t.Error("postgres runs its old postmaster: the restart did not happen")
		}
		checkWhole(t, files, dirs...)
		// The restart marker goes once the server is back.
		waitFor(t, "the restart marker to go", nil, stateDir, func() bool {
			m, _ := filepath.Glob(filepath.Join(stateDir, "restart-pending*"))
			return len(m) == 0
		})
		// The restart's report and pg_ctl's output go too, however the
		// host's restart script ended: its trap when its write met the
		// dead connection, its detached part when the cancel's kill
		// reached it first (TestRestartScriptLeavesNoFiles has each).
		waitFor(t, "the restart's temporary files to go", nil, "/tmp", func() bool { return len(newNames(restartTemps(), before)) == 0 })
	})

	// A host where a restart never brought postgres back (the host lost
	// its restart half-way): the server is down and pgtune's restart
	// marker is still there. The next apply must start it, not call a
	// stopped server in policy.
	pg.Stop(t)
	marker := filepath.Join(stateDir, "restart-pending"+strings.ReplaceAll(pg.DataDir, "/", "%"))
	writeFile(t, marker, "run=interrupted-test-run\ndata="+pg.DataDir+"\n")
	t.Logf("%s: kills done", time.Since(start))
	if _, r, stderr := pgtune(t, "check", "-i", inv, book); !strings.Contains(strings.Join(r.Hosts[0].Notes, "\n"), "left stopped by an unfinished pgtune restart: apply will start it") {
		t.Errorf("check does not say postgres was left stopped by pgtune: notes %q\n%s", r.Hosts[0].Notes, stderr)
	}

	// The next apply converges and verifies; check then exits 0.
	code, applied, stderr := pgtune(t, "apply", "--yes", "-v", "-i", inv, book)
	t.Logf("%s: converging apply done", time.Since(start))
	if code != 0 {
		t.Fatalf("apply after the kills: exit %d %+v\n%s\nserver log:\n%s", code, applied, stderr, pg.Log(t))
	}
	if code, r, stderr := pgtune(t, "check", "-i", inv, book); code != 0 {
		t.Fatalf("check after the kills: exit %d, %v\n%s", code, changeSet(r.Hosts[0].Changes), stderr)
	}
	for p, s := range files {
		if b, err := os.ReadFile(p); err != nil || !sameContent(string(b), s.after) {
			t.Errorf("%s after converging: %q, %v", p, b, err)
		}
	}
	if v := pg.Query(t, "SHOW huge_pages"); v != "on" {
		t.Errorf("huge_pages = %s after converging", v)
	}
	if hp := pg.HugetlbPages(t); hp <= 0 {
		t.Errorf("postmaster HugetlbPages = %d kB: not on huge pages", hp)
	}
	if exists(marker) {
		t.Error("restart marker still there after postgres was started")
	}
	if left := strayTemps(dirs...); len(left) > 0 {
		t.Errorf("temporary files: %s", strings.Join(left, ", "))
	}
}

// TestHostsLostMidRun runs one apply over four hosts: one whose sshd dies
// (listener and connections) while its postgres restart runs, one that
// works, one with nothing listening, and one whose sshd accepts but never
// answers. Each failure is reported on its own host with the step named;
// the working host still finishes; the exit code is 1.
func TestHostsLostMidRun(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: real sshd, PostgreSQL and kernel")
	}
	// The servers first, the kernel lock after: building them needs no
	// lock (others' kernel tests need not wait on it), and StopOnCleanup
	// stops postgres before the lock goes.
	dropSSHD, okSSHD := testhost.SSHD(t), testhost.SSHD(t)
	pg := testhost.Postgres(t)
	kernel := testhost.LockKernel(t)
	testhost.StopOnCleanup(t, pg)
	// A pool for pgconf to size against, held still for the whole run so
	// the hosts (all this machine) plan no kernel change: room for 128 MiB
	// (one page of a larger default size) beside what others hold, the
	// cluster sized to that share.
	share := kernel.PagesFor(128<<20) * kernel.PageSize()
	pages := kernel.MakeRoom(t, share/kernel.PageSize())
	work := t.TempDir()
	flag := filepath.Join(work, "restarting")
	hook := filepath.Join(work, "linger.sh")
	// The restart lingers long enough for the connection to be cut under it.
	writeFile(t, hook, "touch "+flag+"\nsleep 5\n")

	refused := closedPort(t)
	hang := blackhole(t)
	// Each host its own state directory: db-drop and db-ok are the same
	// machine, and one state directory holds one host's lock and journals.
	dir := func(h string) string {
		return "sysctl_dir: " + filepath.Join(work, h) + "\n          pgtune_state_dir: " + filepath.Join(work, "state-"+h)
	}
	inv := filepath.Join(work, "inventory.yml")
	writeFile(t, inv, "all:\n  children:\n    restart:\n      hosts:\n"+
		sshdHost("db-drop", dropSSHD, dir("db-drop"), "pg_data: "+pg.DataDir, "pg_bin: "+pg.BinDir, "pg_restart: sh "+hook)+
		"    kernel:\n      hosts:\n"+
		sshdHost("db-ok", okSSHD, dir("db-ok"))+
		fmt.Sprintf("        db-gone:\n          ssh_host: 127.0.0.1\n          ssh_port: %d\n          ssh_user: root\n          ssh_private_key_file: %s\n          ssh_known_hosts_file: %s\n          %s\n",
			refused, okSSHD.KeyFile, okSSHD.KnownHostsFile, dir("db-gone"))+
		fmt.Sprintf("        db-hang:\n          ssh_host: 127.0.0.1\n          ssh_port: %d\n          ssh_user: root\n          ssh_private_key_file: %s\n          ssh_known_hosts_file: %s\n          %s\n",
			hang, okSSHD.KeyFile, okSSHD.KnownHostsFile, dir("db-hang")))
	hp := `    hugepages:
      pool: "${(facts.hugepages_total - facts.hugepages_surp) * facts.hugepage_size}"
      sysctl_file: "${vars.sysctl_dir}/10-hugepages.conf"
`
	book := filepath.Join(work, "book.yml")
	writeFile(t, book, "- name: restart\n  hosts: restart\n  policy:\n"+hp+"    pgconf:\n      restart: true\n      pool: "+fmt.Sprint(share)+"\n"+
		"- name: kernel\n  hosts: kernel\n  policy:\n"+hp)

	type result struct {
		code   int
		r      jsonReport
		stderr string
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		code, r, stderr := pgtune(t, "apply", "--yes", "-v", "-i", inv, book)
		done <- result{code, r, stderr}
	}()
	// Cut db-drop off while its restart runs.
	waitFor(t, "the restart of db-drop", nil, filepath.Dir(flag), func() bool { return exists(flag) })
	killSSHD(t, dropSSHD)
	var res result
	select {
	case res = <-done:
	case <-time.After(3 * time.Minute):
		t.Fatal("apply did not finish within 3 minutes of the connection drop")
	}
	t.Logf("apply over 4 hosts took %s", time.Since(start))

	if res.code != 1 {
		t.Errorf("exit %d, want 1", res.code)
	}
	hosts := map[string]int{}
	for i, h := range res.r.Hosts {
		hosts[h.Name] = i
	}
	host := func(name string) (string, string) {
		i, ok := hosts[name]
		if !ok {
			t.Fatalf("no %s in the report: %+v", name, res.r)
		}
		h := res.r.Hosts[i]
		e := ""
		if h.Error != nil {
			e = *h.Error
		}
		return h.Status, e
	}
	for _, tc := range []struct {
		host     string
		statuses string
		errHas   []string
	}{
		{"db-drop", "unreachable", []string{"db-drop: pgconf:", "lost the connection during the postgres restart", "connection lost"}},
		{"db-ok", "changed", nil},
		{"db-gone", "unreachable", []string{"db-gone: connect:", "connection refused"}},
		{"db-hang", "unreachable", []string{"db-hang: connect:", "timed out"}},
	} {
		st, e := host(tc.host)
		t.Logf("%s: %s: %s", tc.host, st, e)
		if !strings.Contains(tc.statuses, st) {
			t.Errorf("%s: status %q, want %s (error %q)", tc.host, st, tc.statuses, e)
		}
		for _, want := range tc.errHas {
			if !strings.Contains(e, want) {
				t.Errorf("%s: error %q lacks %q", tc.host, e, want)
			}
		}
		if tc.errHas == nil && e != "" {
			t.Errorf("%s: unexpected error %q", tc.host, e)
		}
	}
	if b, err := os.ReadFile(filepath.Join(work, "db-ok", "10-hugepages.conf")); err != nil || !strings.Contains(string(b), fmt.Sprintf("vm.nr_hugepages = %d", pages)) {
		t.Errorf("db-ok did not finish its change: %q, %v", b, err)
	}
	if t.Failed() {
		t.Logf("report: %+v\nstderr:\n%s", res.r, res.stderr)
	}
	// The restart the dropped connection interrupted still ran to its end
	// on the host, and postgres is up.
	waitFor(t, "the end of db-drop's restart", nil, filepath.Join(work, "state-db-drop"), func() bool {
		m, _ := filepath.Glob(filepath.Join(work, "state-db-drop", "restart-pending*"))
		return len(m) == 0
	})
	waitPostgresUp(t, pg)
}

// TestBecomeWithoutSudo logs in over a real sshd as a user without
// passwordless sudo, with become set: the host fails at once with a
// message saying what to fix, instead of hanging on a password prompt.
func TestBecomeWithoutSudo(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: real sshd")
	}
	testhost.WatchKernel(t) // check gathers this machine's facts
	testhost.EnsureUser(t, "pgtune-nosudo", false)
	sshd := testhost.SSHD(t)
	work := t.TempDir()
	inv := filepath.Join(work, "inventory.yml")
	writeFile(t, inv, "all:\n  children:\n    postgres:\n      hosts:\n"+
		strings.Replace(sshdHost("db1", sshd, "become: true"), "ssh_user: root", "ssh_user: pgtune-nosudo", 1)+
		"      vars:\n        sysctl_dir: "+filepath.Join(work, "sysctl.d")+"\n")
	book := filepath.Join(work, "kernel.yml")
	writeFile(t, book, `- name: kernel
  hosts: postgres
  policy:
    hugepages:
      pool: "${(facts.hugepages_total - facts.hugepages_surp + 1) * facts.hugepage_size}"
      min_available: 0 # grows the pool by a page: the preflight verdict would be the machine's
      sysctl_file: "${vars.sysctl_dir}/10-hugepages.conf"
`)
	for _, cmd := range []string{"check", "apply"} {
		start := time.Now()
		args := []string{cmd, "-i", inv, book}
		if cmd == "apply" {
			args = append(args, "--yes")
		}
		code, r, stderr := pgtune(t, args...)
		took := time.Since(start)
		if code != 1 || len(r.Hosts) != 1 || r.Hosts[0].Status != "failed" || r.Hosts[0].Error == nil {
			t.Fatalf("%s: exit %d %+v\n%s", cmd, code, r, stderr)
		}
		msg := *r.Hosts[0].Error
		t.Logf("%s (%s): %s", cmd, took, msg)
		// sudo -n refuses instead of waiting for a password: the error
		// names the fix, it is no timeout.
		if !strings.Contains(msg, "become needs passwordless sudo for user pgtune-nosudo") {
			t.Errorf("%s: error %q does not say what to fix", cmd, msg)
		}
	}
	if exists(filepath.Join(work, "sysctl.d")) {
		t.Error("a refused host was changed")
	}
}

// TestReadOnlyProcSys runs pgtune (local connection) in a mount namespace
// where /proc/sys is read-only, as in a container: check and apply fail
// on the host with that reason, facts say so, nothing is written.
func TestReadOnlyProcSys(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: needs root and a mount namespace")
	}
	testhost.WatchKernel(t) // reads the kernel; must see it hold still
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Fatal("unshare (util-linux) not installed")
	}
	bin := buildPgtune(t)
	work := t.TempDir()
	book := filepath.Join(work, "kernel.yml")
	sysctlFile := filepath.Join(work, "sysctl.d", "10-hugepages.conf")
	writeFile(t, book, `- name: kernel
  hosts: all
  policy:
    hugepages:
      pool: "${(facts.hugepages_total - facts.hugepages_surp + 1) * facts.hugepage_size}"
      min_available: 0 # grows the pool by a page: the preflight verdict would be the machine's
      sysctl_file: `+sysctlFile+`
`)
	// A private bind of /proc/sys over itself, remounted read-only: only
	// this namespace sees it.
	const setup = `mount --make-rprivate / && mount --bind /proc/sys /proc/sys && mount -o remount,bind,ro /proc/sys || exit 99
if [ -w /proc/sys/vm/nr_hugepages ]; then echo "/proc/sys still writable"; exit 98; fi
"$@"`
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"check", "--format", "json", book}, 1, `localhost: hugepages: /proc/sys is read-only (container?): cannot set vm.nr_hugepages`},
		{[]string{"apply", "--yes", "--format", "json", book}, 1, `localhost: hugepages: /proc/sys is read-only (container?): cannot set vm.nr_hugepages`},
		{[]string{"facts"}, 0, "sysctl:                /proc/sys is read-only"},
	} {
		cmd := exec.Command("unshare", append([]string{"-m", "sh", "-c", setup, "sh", bin}, tc.args...)...)
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != tc.code || !strings.Contains(string(out), tc.want) {
			t.Errorf("pgtune %s in a read-only /proc/sys: exit %d (want %d), want %q in:\n%s", strings.Join(tc.args, " "), code, tc.code, tc.want, out)
		}
	}
	if exists(sysctlFile) {
		t.Error("apply wrote the sysctl file although it cannot set the kernel value")
	}
}
