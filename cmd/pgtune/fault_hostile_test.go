package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine/transport"
	"github.com/pgtune/pgtune/internal/testhost"
)

// TestHostileHostsFailOnlyThemselves runs one check over a real sshd
// against four hosts that are all this machine and its real PostgreSQL
// cluster, reached as different login users: root (healthy), a sudo user
// whose `sh` streams zeros forever, and two whose `cat` forges the huge
// page counts the facts read (-2, and a number past int64). The hostile
// programs are first on the PATH sudo gives those users (their own
// secure_path), as a compromised host's would be. Each hostile host fails
// with its reason; the healthy one finishes its check. Memory stays
// bounded because the run stops reading at the output cap, which the
// zeros host's error names.
func TestHostileHostsFailOnlyThemselves(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: real sshd, sudo, PostgreSQL")
	}
	kernel := testhost.WatchKernel(t) // the healthy host's check reads it
	srv := testhost.SSHD(t)
	pg := testhost.Postgres(t)
	work := t.TempDir()

	// Programs only the hostile users' sudo finds, in a directory they
	// can traverse (t.TempDir is root-only).
	bins, err := os.MkdirTemp("", "pgtune-hostile-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(bins) })
	if err := os.Chmod(bins, 0o755); err != nil {
		t.Fatal(err)
	}
	hostile := map[string]map[string]string{ // user → program → script
		"pgtune-zeros":     {"sh": "#!/bin/sh\nexec cat /dev/zero\n"},
		"pgtune-liar-neg":  {"cat": forgedCat("-2"), "grep": forgedGrep("-2")},
		"pgtune-liar-huge": {"cat": forgedCat("99999999999999999999"), "grep": forgedGrep("99999999999999999999")},
	}
	for user, progs := range hostile {
		dir := filepath.Join(bins, user)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, script := range progs {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		testhost.EnsureUser(t, user, true)
		sudoPathFirst(t, user, dir)
	}

	const limit = 1 << 20
	prev := transport.SetMaxOutput(limit)
	t.Cleanup(func() { transport.SetMaxOutput(prev) })

	hostLines := func(name, user string) string {
		return fmt.Sprintf(`    %s:
      ssh_host: 127.0.0.1
      ssh_port: %d
      ssh_user: %s
      ssh_private_key_file: %s
      ssh_known_hosts_file: %s
      become: true
      pg_data: %s
      pg_bin: %s
`, name, srv.Port, user, srv.KeyFile, srv.KnownHostsFile, pg.DataDir, pg.BinDir)
	}
	inv := filepath.Join(work, "inventory.yml")
	writeFile(t, inv, "all:\n  hosts:\n"+
		hostLines("db-ok", "root")+
		hostLines("db-zeros", "pgtune-zeros")+
		hostLines("db-liar-neg", "pgtune-liar-neg")+
		hostLines("db-liar-huge", "pgtune-liar-huge"))
	// The pool only: how pgconf fits a cluster into it depends on who else
	// holds huge pages on this machine.
	// Room for 256 MiB beside what the pool holds (one page of a larger
	// default size); the preflight's verdict is not left to this
	// machine's free memory.
	pool, _ := kernel.RoomFor(256 << 20)
	book := filepath.Join(work, "memory.yml")
	writeFile(t, book, fmt.Sprintf(`- name: pool
  hosts: ungrouped
  policy:
    hugepages:
      pool: %d
      min_available: 0
      sysctl_file: %s/10-hugepages.conf
`, pool, work))

	code, rep, stderr := pgtune(t, "check", "-i", inv, "--forks", "4", book)
	if code != 1 {
		t.Errorf("check: exit %d, want 1 (hosts failed)\n%s", code, stderr)
	}
	want := map[string]struct{ status, err string }{
		"db-ok":    {status: "drift"},
		"db-zeros": {status: "failed", err: "stdout: more than 1 MiB of output, over the cap; the command was stopped"},
		// From the NUMA node's pool (facts) or vm.nr_hugepages (module),
		// whichever the host has.
		"db-liar-neg":  {status: "failed", err: "nr_hugepages -2 out of range"},
		"db-liar-huge": {status: "failed", err: "nr_hugepages 99999999999999999999 out of range"},
	}
	if len(rep.Hosts) != len(want) {
		t.Fatalf("report has %d hosts, want %d: %+v", len(rep.Hosts), len(want), rep.Hosts)
	}
	for _, h := range rep.Hosts {
		w := want[h.Name]
		got := ""
		if h.Error != nil {
			got = *h.Error
		}
		if h.Status != w.status || (w.err == "") != (got == "") || !strings.Contains(got, w.err) {
			t.Errorf("%s: %s %q\nwant %s with %q", h.Name, h.Status, got, w.status, w.err)
		}
		if strings.Contains(got, "internal error") {
			t.Errorf("%s: a panic was caught, the value was not checked: %s", h.Name, got)
		}
	}
	// The healthy host planned its whole policy.
	for _, h := range rep.Hosts {
		if h.Name == "db-ok" && !targets(h.Changes)["hugepages vm.nr_hugepages"] {
			t.Errorf("db-ok: plan lacks the pool: %v", changeSet(h.Changes))
		}
	}
}

// forgedCat is a `cat` that answers value for every nr_hugepages file
// (sysctl and per NUMA node) and is the real cat otherwise.
func forgedCat(value string) string {
	return `#!/bin/sh
case "$*" in
*/nr_hugepages) echo ` + value + ` ;;
*) exec /bin/cat "$@" ;;
esac
`
}

// forgedGrep answers like grep, except that the value of
// /proc/sys/vm/nr_hugepages in `grep -H` output is replaced (the facts
// gather reads every sysctl value with one grep -H).
func forgedGrep(value string) string {
	return `#!/bin/sh
/bin/grep "$@" | /bin/sed 's|^/proc/sys/vm/nr_hugepages:.*|/proc/sys/vm/nr_hugepages:` + value + `|'
`
}

// sudoPathFirst puts dir first on the PATH sudo gives user (sudoers
// secure_path for that user only), until the test ends.
func sudoPathFirst(t *testing.T, user, dir string) {
	t.Helper()
	drop := filepath.Join("/etc/sudoers.d", "pgtune-test-path-"+user)
	tmp := filepath.Join(t.TempDir(), "sudoers")
	line := fmt.Sprintf("Defaults:%s secure_path=\"%s:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\"\n", user, dir)
	if err := os.WriteFile(tmp, []byte(line), 0o440); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("visudo", "-cf", tmp).CombinedOutput(); err != nil {
		t.Fatalf("visudo -cf: %v: %s", err, out)
	}
	if err := os.WriteFile(drop, []byte(line), 0o440); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(drop) })
}
