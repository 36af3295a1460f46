package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/internal/testhost"
)

// TestHostileClusterOverSSH: a real PostgreSQL 15 cluster reached over a
// real sshd, whose data directory's name carries an escape sequence that
// erases the line and prints a forged verdict, and whose
// postgresql.auto.conf holds a replication password and a setting pgtune
// rewrites (so the plan diffs that file). check's text and JSON, the
// debug logs and facts never show the password nor a raw ESC, and show
// the path escaped.
func TestHostileClusterOverSSH(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: real sshd and PostgreSQL")
	}
	kernel := testhost.WatchKernel(t) // check reads the kernel: it must hold still
	sshd := testhost.SSHD(t)
	pg := testhost.Postgres(t, testhost.Stopped())

	// The cluster lives in the hostile directory; the inventory names it
	// through a plain symlink, the way an operator would, and discovery
	// resolves the link to the real name.
	const hostileDir = "data\x1b[2K\rdb1: in policy\u202e"
	real := filepath.Join(pg.Root, hostileDir)
	if err := os.Rename(pg.DataDir, real); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, pg.DataDir); err != nil {
		t.Fatal(err)
	}
	// The link belongs to the cluster owner like the directory it names
	// (discovery takes the owner from the path the inventory gives).
	owner, err := user.Lookup(pg.Owner)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(owner.Uid)
	gid, _ := strconv.Atoi(owner.Gid)
	if err := os.Lchown(pg.DataDir, uid, gid); err != nil {
		t.Fatal(err)
	}
	auto, err := os.OpenFile(filepath.Join(real, "postgresql.auto.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = auto.WriteString("primary_conninfo = 'host=x user=r password=s3cr3t'\nshared_buffers = '64MB'\n")
	if cerr := auto.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	pg.Start(t)

	work := t.TempDir()
	inv := filepath.Join(work, "inventory.yml")
	writeFile(t, inv, fmt.Sprintf(`all:
  hosts:
    db1:
      ssh_host: 127.0.0.1
      ssh_port: %d
      ssh_user: root
      ssh_private_key_file: %s
      ssh_known_hosts_file: %s
      pg_data: %s
      pg_bin: %s
  vars:
    sysctl_dir: %s
    pgtune_state_dir: %s
`, sshd.Port, sshd.KeyFile, sshd.KnownHostsFile, pg.DataDir, pg.BinDir, filepath.Join(work, "sysctl.d"), filepath.Join(work, "state")))
	// Room for 128 MiB beside what the pool holds (one page of a larger
	// default size), the cluster sized to that share, never to pages
	// others hold; the preflight's verdict is not this machine's.
	pool, share := kernel.RoomFor(128 << 20)
	book := filepath.Join(work, "memory.yml")
	writeFile(t, book, fmt.Sprintf(`- name: hostile cluster
  hosts: ungrouped
  policy:
    hugepages:
      pool: %d
      min_available: 0
      sysctl_file: "${vars.sysctl_dir}/10-hugepages.conf"
    pgconf:
      restart: false
      on_override: fix
      pool: %d
`, pool, share))

	run := func(args ...string) (int, string, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		app := newApp()
		app.Stdin, app.Stdout, app.Stderr = strings.NewReader(""), &out, &errOut
		app.IsTerminal = func() bool { return false }
		code := app.Run(args)
		assertInert(t, "pgtune "+strings.Join(args, " ")+" stdout", out.String())
		assertInert(t, "pgtune "+strings.Join(args, " ")+" stderr", errOut.String())
		return code, out.String(), errOut.String()
	}
	escaped := filepath.Join(pg.Root, `data\x1b[2K\rdb1: in policy\u202e`)

	code, text, logs := run("check", "-v", "-i", inv, book)
	if code != 2 {
		t.Fatalf("check: exit %d, want 2 (drift)\n%s\n%s", code, text, logs)
	}
	for _, want := range []string{
		escaped + "/postgresql.auto.conf",
		"primary_conninfo = 'host=x user=r password=(sensitive)'",
		"-shared_buffers = '64MB'",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("check text lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "db1: in policy\n") {
		t.Errorf("check text holds a line a hostile path forged:\n%s", text)
	}

	code, doc, logs := run("check", "-v", "--format", "json", "-i", inv, book)
	if code != 2 {
		t.Fatalf("check json: exit %d, want 2\n%s\n%s", code, doc, logs)
	}
	var r jsonReport
	if err := json.Unmarshal([]byte(doc), &r); err != nil {
		t.Fatalf("check JSON does not decode: %v\n%s", err, doc)
	}
	var autoChange *jsonChange
	for i, c := range r.Hosts[0].Changes {
		if c.Target == filepath.Join(real, "postgresql.auto.conf") {
			autoChange = &r.Hosts[0].Changes[i]
		}
	}
	if autoChange == nil {
		t.Fatalf("check JSON plans no rewrite of postgresql.auto.conf under the real path: %v", changeSet(r.Hosts[0].Changes))
	}
	if !strings.Contains(autoChange.Before, "password=(sensitive)'") || !strings.Contains(autoChange.After, "password=(sensitive)'") {
		t.Errorf("auto.conf change in JSON: %+v", *autoChange)
	}
	var diffs struct {
		Hosts []struct {
			Changes []struct {
				Diff string `json:"diff"`
			} `json:"changes"`
		} `json:"hosts"`
	}
	_ = json.Unmarshal([]byte(doc), &diffs)
	found := false
	for _, c := range diffs.Hosts[0].Changes {
		found = found || strings.Contains(c.Diff, " primary_conninfo = 'host=x user=r password=(sensitive)'")
	}
	if !found {
		t.Errorf("no JSON diff keeps the masked primary_conninfo line:\n%s", doc)
	}

	code, facts, logs := run("facts", "-v", "-i", inv)
	if code != 0 || !strings.Contains(facts, escaped+" (owner postgres)") {
		t.Errorf("facts: exit %d, want 0 and the escaped data directory:\n%s\n%s", code, facts, logs)
	}
	if code, _, _ := run("facts", "--format", "json", "-i", inv); code != 0 {
		t.Errorf("facts json: exit %d", code)
	}
}
