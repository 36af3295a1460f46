package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/internal/testhost"
)

// noPostgresShell is an sshd ForceCommand: every command of the session
// runs in its own PID and mount namespaces, where no postmaster is
// visible and PostgreSQL's directories are empty. The host is this
// machine's kernel without any PostgreSQL, as an etcd or HAProxy host is.
const noPostgresShell = `#!/bin/sh
exec unshare --mount --pid --fork --mount-proc sh -c '
for d in /etc/postgresql /var/lib/postgresql /usr/lib/postgresql; do
  if [ -d "$d" ]; then mount -t tmpfs none "$d" || exit 1; fi
done
exec sh -c "$SSH_ORIGINAL_COMMAND"'
`

// TestDefaultTargetsSkipHostsWithoutPostgres: an HA-shaped inventory with
// an etcd host (real sshd, no PostgreSQL) and a PostgreSQL host (a real
// cluster, local connection), and a play for hosts: all whose pool would
// grow the etcd host's. The etcd host is reported skipped, with the
// reason, and nothing reaches its kernel or its files, in check and in
// apply; a play that names the etcd group does plan it.
func TestDefaultTargetsSkipHostsWithoutPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("real sshd, PostgreSQL and kernel")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Fatal("unshare (util-linux) not installed")
	}
	// The servers first, the kernel lock after: building them needs no
	// lock (others' kernel tests need not wait on it), and StopOnCleanup
	// stops postgres before the lock goes.
	pg := testhost.Postgres(t)
	kernel := testhost.LockKernel(t)
	testhost.StopOnCleanup(t, pg)
	work := t.TempDir()
	shell := filepath.Join(work, "no-postgres.sh")
	writeFile(t, shell, noPostgresShell)
	if err := os.Chmod(shell, 0o755); err != nil {
		t.Fatal(err)
	}
	sshd := testhost.SSHD(t, "ForceCommand "+shell)
	etcdDir, pgDir := filepath.Join(work, "etcd-sysctl.d"), filepath.Join(work, "pg-sysctl.d")
	inv := filepath.Join(work, "hosts.yml")
	writeFile(t, inv, "all:\n  children:\n    etcd:\n      hosts:\n"+sshdHost("etcd1", sshd,
		"sysctl_dir: "+etcdDir, "extra: 1", "pgtune_state_dir: "+filepath.Join(work, "etcd-state"))+
		"    postgres:\n      hosts:\n        pg1:\n          connection: local\n          pg_data: "+pg.DataDir+
		"\n          sysctl_dir: "+pgDir+"\n          extra: 0\n          pgtune_state_dir: "+filepath.Join(work, "pg-state")+"\n")
	play := func(hosts string) string {
		book := filepath.Join(work, hosts+".yml")
		writeFile(t, book, "- name: pool\n  hosts: "+hosts+`
  policy:
    hugepages:
      pool: "${(facts.hugepages_total - facts.hugepages_surp + vars.extra) * facts.hugepage_size}"
      min_available: 0 # grows the pool by a page: the preflight verdict would be the machine's
      sysctl_file: "${vars.sysctl_dir}/10-hugepages.conf"
`)
		return book
	}
	all := play("all")

	for _, cmd := range [][]string{{"check"}, {"apply", "--yes"}} {
		code, r, stderr := pgtune(t, append(cmd, "-i", inv, all)...)
		if code == 1 || len(r.Hosts) != 2 {
			t.Fatalf("%s: exit %d\n%+v\n%s", cmd[0], code, r, stderr)
		}
		etcd, pg1 := r.Hosts[0], r.Hosts[1]
		if etcd.Name != "etcd1" || etcd.Status != "skipped" || len(etcd.Changes) != 0 || etcd.Error != nil ||
			!slices.Contains(etcd.Notes, "no PostgreSQL cluster found") {
			t.Errorf("%s: etcd1 = %+v; want skipped with the reason", cmd[0], etcd)
		}
		if pg1.Name != "pg1" || pg1.Status == "skipped" || !targets(pg1.Changes)["hugepages "+pgDir+"/10-hugepages.conf"] {
			t.Errorf("%s: pg1 = %+v; want its sysctl file planned", cmd[0], pg1)
		}
		if r.Summary["skipped"] != 1 {
			t.Errorf("%s: summary %v", cmd[0], r.Summary)
		}
	}
	if exists(etcdDir) || exists(filepath.Join(work, "etcd-state")) {
		t.Error("the skipped etcd host was written to")
	}
	if !exists(filepath.Join(pgDir, "10-hugepages.conf")) {
		t.Error("pg1 was not applied")
	}
	for k, v := range kernel.Values {
		if now, _ := testhost.ReadSysctl(k); now != v {
			t.Errorf("%s changed from %s to %s", k, v, now)
		}
	}

	// Named by its group, the etcd host is worked on: its pool would grow.
	code, r, stderr := pgtune(t, "check", "-i", inv, play("etcd"))
	if code != 2 || len(r.Hosts) != 1 || r.Hosts[0].Status != "drift" || !targets(r.Hosts[0].Changes)["hugepages vm.nr_hugepages"] {
		t.Fatalf("hosts: etcd: exit %d\n%+v\n%s", code, r, stderr)
	}
	if !strings.Contains(strings.Join(r.Hosts[0].Notes, "\n"), "no PostgreSQL cluster found") {
		t.Errorf("etcd notes %q", r.Hosts[0].Notes)
	}
}
