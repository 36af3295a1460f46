package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/inventory"
	"github.com/pgtune/pgtune/engine/plan"
	"github.com/pgtune/pgtune/engine/transport"
	"github.com/pgtune/pgtune/internal/testhost"
)

// gate is a module for the state directory and lock tests: it writes one
// file (params file, content) through the engine, so the write is
// journalled and backed up like any module's, and its Apply can be held
// open to keep a run inside its lock.
type gate struct {
	dir     string        // the files it manages live here
	entered chan struct{} // closed when Apply starts (nil: never waits)
	release chan struct{} // Apply waits for it (or for its context)
	once    sync.Once
}

type gateParams struct {
	File    string `yaml:"file"`
	Content string `yaml:"content"`
}

func (*gate) Name() string       { return "gate" }
func (*gate) Requires() []string { return nil }
func (*gate) NewParams() any     { return &gateParams{} }
func (*gate) Validate(any) error { return nil }

func (g *gate) Check(ctx context.Context, t *engine.Target, raw any) (*plan.ModulePlan, error) {
	prm := raw.(*gateParams)
	p := &plan.ModulePlan{Module: "gate", State: prm}
	cur, _, err := t.ReadFile(ctx, prm.File)
	if err != nil {
		return nil, err
	}
	if string(cur) != prm.Content {
		p.Add(plan.Change{Kind: plan.KindFile, Target: prm.File, Before: string(cur), After: prm.Content})
	}
	return p, nil
}

func (g *gate) Apply(ctx context.Context, t *engine.Target, p *plan.ModulePlan) error {
	if g.entered != nil {
		g.once.Do(func() { close(g.entered) })
		select {
		case <-g.release:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	prm := p.State.(*gateParams)
	return t.WriteFile(ctx, prm.File, []byte(prm.Content), transport.WriteOptions{})
}

func (g *gate) Verify(ctx context.Context, t *engine.Target, p *plan.ModulePlan) error {
	prm := p.State.(*gateParams)
	cur, _, err := t.ReadFile(ctx, prm.File)
	if err != nil || string(cur) != prm.Content {
		return fmt.Errorf("%s: %q, %v", prm.File, cur, err)
	}
	return nil
}

// Manages: the files in its directory, nothing else.
func (g *gate) Manages(_ *engine.Target, kind, target string) bool {
	return kind == "file" && strings.HasPrefix(target, g.dir+"/")
}

// applyReport is the JSON report with the run id apply adds.
type applyReport struct {
	RunID string `json:"run_id"`
	jsonReport
}

// runWith runs the CLI in-process with the given modules; it reports
// problems as errors so it can run in a goroutine.
func runWith(mods []engine.Module, args ...string) (int, applyReport, string, error) {
	var stdout, stderr bytes.Buffer
	app := newApp()
	app.Modules = mods
	app.Stdin = strings.NewReader("")
	app.Stdout, app.Stderr = &stdout, &stderr
	app.IsTerminal = func() bool { return false }
	code := app.Run(append(args, "--format", "json"))
	var r applyReport
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		return code, r, stderr.String(), fmt.Errorf("pgtune %s: exit %d, stdout is not a JSON report (%v):\n%s\nstderr:\n%s",
			strings.Join(args, " "), code, err, stdout.String(), stderr.String())
	}
	return code, r, stderr.String(), nil
}

func mustRunWith(t *testing.T, mods []engine.Module, args ...string) (int, applyReport, string) {
	t.Helper()
	code, r, stderr, err := runWith(mods, args...)
	if err != nil {
		t.Fatal(err)
	}
	return code, r, stderr
}

func hostError(r applyReport) string {
	if len(r.Hosts) != 1 || r.Hosts[0].Error == nil {
		return ""
	}
	return *r.Hosts[0].Error
}

// gateHost is one host reached over a real sshd, with a gate playbook
// writing content into dir/managed.conf and its state in stateDir.
type gateHost struct {
	inv, book, file, stateDir, dir string
}

func newGateHost(t *testing.T, content string) gateHost {
	t.Helper()
	return newGateHostAs(t, content, "root")
}

// newGateHostAs logs in as user, with become unless that is root.
func newGateHostAs(t *testing.T, content, user string) gateHost {
	t.Helper()
	sshd := testhost.SSHD(t)
	work := t.TempDir()
	h := gateHost{dir: filepath.Join(work, "managed"), stateDir: filepath.Join(work, "state")}
	h.file = filepath.Join(h.dir, "managed.conf")
	if err := os.Mkdir(h.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	h.inv = filepath.Join(work, "inventory.yml")
	entry := sshdHost("db1", sshd, "pgtune_state_dir: "+h.stateDir)
	if user != "root" {
		entry = strings.Replace(entry, "ssh_user: root", "ssh_user: "+user+"\n          become: true", 1)
	}
	writeFile(t, h.inv, "all:\n  hosts:\n"+strings.ReplaceAll(entry, "        ", "    "))
	h.book = filepath.Join(work, "gate.yml")
	writeFile(t, h.book, fmt.Sprintf("- name: gate\n  hosts: ungrouped\n  policy:\n    gate:\n      file: %s\n      content: %q\n", h.file, content))
	return h
}

func readString(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

var lockedMessage = regexp.MustCompile(`^db1: locked by run (\S+) \(pid ([0-9]+) on controller (\S+)\) since (\S+);`)

// TestConcurrentApplies: two applies on the same host over a real sshd.
// The first holds the host lock while it applies; the second is refused
// with who holds it and exit 1, changing nothing; the first succeeds.
func TestConcurrentApplies(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: real sshd")
	}
	h := newGateHost(t, "new\n")
	writeFile(t, h.file, "old\n")
	first := &gate{dir: h.dir, entered: make(chan struct{}), release: make(chan struct{})}
	type outcome struct {
		code   int
		r      applyReport
		stderr string
		err    error
	}
	done := make(chan outcome, 1)
	go func() {
		code, r, stderr, err := runWith([]engine.Module{first}, "apply", "--yes", "-i", h.inv, h.book)
		done <- outcome{code, r, stderr, err}
	}()
	select {
	case <-first.entered:
	case o := <-done:
		t.Fatalf("the first apply ended before applying: exit %d %v\n%s", o.code, o.err, o.stderr)
	}

	code, second, stderr := mustRunWith(t, []engine.Module{&gate{dir: h.dir}}, "apply", "--yes", "-i", h.inv, h.book)
	msg := hostError(second)
	m := lockedMessage.FindStringSubmatch(msg)
	if code != 1 || second.Hosts[0].Status != "failed" || m == nil {
		close(first.release)
		t.Fatalf("second apply: exit %d, status %s, error %q; want exit 1 and %s\n%s", code, second.Hosts[0].Status, msg, lockedMessage, stderr)
	}
	host, _ := os.Hostname()
	if m[2] != strconv.Itoa(os.Getpid()) || m[3] != host {
		t.Errorf("lock message names pid %s on %s, want %d on %s", m[2], m[3], os.Getpid(), host)
	}
	if got := readString(t, h.file); got != "old\n" {
		t.Errorf("the refused apply changed the file: %q", got)
	}

	close(first.release)
	o := <-done
	if o.err != nil {
		t.Fatal(o.err)
	}
	if o.code != 0 || o.r.Hosts[0].Status != "changed" {
		t.Fatalf("first apply: exit %d status %s error %q\n%s", o.code, o.r.Hosts[0].Status, hostError(o.r), o.stderr)
	}
	if m[1] != o.r.RunID {
		t.Errorf("lock message names run %s, the holder was run %s", m[1], o.r.RunID)
	}
	if got := readString(t, h.file); got != "new\n" {
		t.Errorf("file after the first apply: %q", got)
	}
	// The lock went with the first run: the next one gets it.
	if code, r, stderr := mustRunWith(t, []engine.Module{&gate{dir: h.dir}}, "apply", "--yes", "-i", h.inv, h.book); code != 0 || r.Hosts[0].Status != "ok" {
		t.Fatalf("apply after the first finished: exit %d status %s error %q\n%s", code, r.Hosts[0].Status, hostError(r), stderr)
	}
}

// TestStaleLockTakenOver: the first run's lock holder on the host is
// killed mid-apply. The first run stops (without the lock it changes
// nothing more) and says why; the next run takes the lock over.
func TestStaleLockTakenOver(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: real sshd")
	}
	h := newGateHost(t, "new\n")
	writeFile(t, h.file, "old\n")
	first := &gate{dir: h.dir, entered: make(chan struct{}), release: make(chan struct{})}
	defer close(first.release)
	done := make(chan applyReport, 1)
	go func() {
		_, r, _, _ := runWith([]engine.Module{first}, "apply", "--yes", "-i", h.inv, h.book)
		done <- r
	}()
	<-first.entered
	lock := readString(t, filepath.Join(h.stateDir, "lock"))
	holder := regexp.MustCompile(`(?m)^holder=([0-9]+)$`).FindStringSubmatch(lock)
	if holder == nil {
		t.Fatalf("lock file: %q", lock)
	}
	pid, _ := strconv.Atoi(holder[1])
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if msg := hostError(r); r.Hosts[0].Status != "failed" || !strings.Contains(msg, "lost the host lock") {
		t.Errorf("first run after its lock holder was killed: status %s, error %q", r.Hosts[0].Status, msg)
	}
	if got := readString(t, h.file); got != "old\n" {
		t.Errorf("the run that lost its lock changed the file: %q", got)
	}
	code, next, stderr := mustRunWith(t, []engine.Module{&gate{dir: h.dir}}, "apply", "--yes", "-i", h.inv, h.book)
	if code != 0 || next.Hosts[0].Status != "changed" || readString(t, h.file) != "new\n" {
		t.Fatalf("next apply: exit %d status %s error %q\n%s", code, next.Hosts[0].Status, hostError(next), stderr)
	}
}

// TestUnsafeStateDirRefused: a state directory someone else owns, that
// others may write, or that is a symbolic link is refused by name, by
// apply and by rollback, and nothing is changed or created.
func TestUnsafeStateDirRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: real sshd")
	}
	nobody, err := strconv.Atoi(testhost.UID(t, "nobody"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string)
		want  string
	}{
		{"owned by nobody", func(t *testing.T, dir string) {
			mkdirOwned(t, dir, 0o700, nobody)
		}, fmt.Sprintf("is owned by nobody (uid %d), not root", nobody)},
		{"mode 0777", func(t *testing.T, dir string) {
			mkdirOwned(t, dir, 0o777, 0)
		}, "is writable by group or others (mode 777)"},
		{"symbolic link", func(t *testing.T, dir string) {
			real := dir + ".real"
			mkdirOwned(t, real, 0o700, 0)
			if err := os.Symlink(real, dir); err != nil {
				t.Fatal(err)
			}
		}, "is a symbolic link"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newGateHost(t, "new\n")
			writeFile(t, h.file, "old\n")
			tc.setup(t, h.stateDir)
			want := fmt.Sprintf("state directory %s: %s %s: refusing to use it", h.stateDir, h.stateDir, tc.want)
			for _, cmd := range [][]string{{"apply", "--yes", "-i", h.inv, h.book}, {"rollback", "--yes", "-i", h.inv}} {
				code, r, stderr := mustRunWith(t, []engine.Module{&gate{dir: h.dir}}, cmd...)
				if msg := hostError(r); code != 1 || !strings.HasPrefix(msg, "db1: ") || !strings.HasSuffix(msg, want) {
					t.Errorf("%s: exit %d error %q\nwant exit 1 and %q\n%s", cmd[0], code, hostError(r), want, stderr)
				}
			}
			if got := readString(t, h.file); got != "old\n" {
				t.Errorf("file changed: %q", got)
			}
			if ents, _ := os.ReadDir(h.stateDir); len(ents) != 0 {
				t.Errorf("created in the refused state directory: %v", ents)
			}
		})
	}
}

func mkdirOwned(t *testing.T, dir string, mode os.FileMode, uid int) {
	t.Helper()
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, uid, uid); err != nil {
		t.Fatal(err)
	}
}

// TestBackupKeepsMode: the backup of a 0600 file stays 0600, root's, in
// directories only root can enter, so another user cannot read it; the
// state directory is made root 0700; rollback gives the file back with
// its mode.
func TestBackupKeepsMode(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: real sshd and a real unprivileged user")
	}
	h := newGateHost(t, "password = new\n")
	if err := os.WriteFile(h.file, []byte("password = secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, r, stderr := mustRunWith(t, []engine.Module{&gate{dir: h.dir}}, "apply", "--yes", "-i", h.inv, h.book)
	if code != 0 {
		t.Fatalf("apply: exit %d %q\n%s", code, hostError(r), stderr)
	}
	backup := filepath.Join(h.stateDir, r.RunID, "files", h.file)
	fi, err := os.Stat(backup)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 || fi.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Errorf("backup %s: mode %v uid %d, want 0600 root", backup, fi.Mode().Perm(), fi.Sys().(*syscall.Stat_t).Uid)
	}
	for d := filepath.Dir(backup); ; d = filepath.Dir(d) {
		fi, err := os.Lstat(d)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o700 || fi.Sys().(*syscall.Stat_t).Uid != 0 {
			t.Errorf("%s: mode %v uid %d, want 0700 root", d, fi.Mode().Perm(), fi.Sys().(*syscall.Stat_t).Uid)
		}
		if d == h.stateDir {
			break
		}
	}
	// As another user: neither the backup nor the journal can be read.
	for _, p := range []string{backup, filepath.Join(h.stateDir, r.RunID, "journal.json")} {
		out, err := exec.Command("runuser", "-u", "nobody", "--", "cat", p).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "Permission denied") {
			t.Errorf("nobody reading %s: %v %q; want permission denied", p, err, out)
		}
	}
	if code, r, stderr := mustRunWith(t, []engine.Module{&gate{dir: h.dir}}, "rollback", "--yes", "-i", h.inv); code != 0 {
		t.Fatalf("rollback: exit %d %q\n%s", code, hostError(r), stderr)
	}
	fi, err = os.Stat(h.file)
	if err != nil || fi.Mode().Perm() != 0o600 || readString(t, h.file) != "password = secret\n" {
		t.Errorf("after rollback: %v %v %q, want the 0600 original", fi.Mode(), err, readString(t, h.file))
	}
}

// TestRollbackRefusesForeignEntries: a journal naming a file no module
// manages, or not matching its directory, or not a journal at all makes
// rollback refuse the host with the entry named, and nothing changes;
// the genuine journal still rolls back.
func TestRollbackRefusesForeignEntries(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: real sshd")
	}
	h := newGateHost(t, "new\n")
	writeFile(t, h.file, "old\n")
	mods := []engine.Module{&gate{dir: h.dir}}
	code, r, stderr := mustRunWith(t, mods, "apply", "--yes", "-i", h.inv, h.book)
	if code != 0 {
		t.Fatalf("apply: exit %d %q\n%s", code, hostError(r), stderr)
	}
	journal := filepath.Join(h.stateDir, r.RunID, "journal.json")
	genuine, err := os.ReadFile(journal)
	if err != nil {
		t.Fatal(err)
	}
	passwd := readString(t, "/etc/passwd")
	// The backup a forged entry points at: /etc/passwd's own content, so
	// that even a rollback that wrongly accepted it could not damage this
	// machine (the exit code and the gate file still tell).
	decoy := filepath.Join(h.stateDir, r.RunID, "files", "etc", "passwd")
	if err := os.MkdirAll(filepath.Dir(decoy), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(decoy, []byte(passwd), 0o644); err != nil {
		t.Fatal(err)
	}

	tamper := func(t *testing.T, edit func(j map[string]any)) []byte {
		var j map[string]any
		if err := json.Unmarshal(genuine, &j); err != nil {
			t.Fatal(err)
		}
		edit(j)
		b, err := json.Marshal(j)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	addEntry := func(e map[string]any) func(j map[string]any) {
		return func(j map[string]any) { j["entries"] = append(j["entries"].([]any), e) }
	}
	tests := []struct {
		name    string
		journal func(t *testing.T) []byte
		want    string
	}{
		{"/etc/passwd", func(t *testing.T) []byte {
			return tamper(t, addEntry(map[string]any{"kind": "file", "module": "gate", "path": "/etc/passwd", "backup": decoy, "existed": true}))
		}, "entry 2 (file /etc/passwd by module gate): module gate does not manage it on this host"},
		{"a module that manages nothing", func(t *testing.T) []byte {
			return tamper(t, addEntry(map[string]any{"kind": "file", "module": "overcommit", "path": h.dir + "/x.conf",
				"backup": filepath.Join(h.stateDir, r.RunID, "files", h.dir, "x.conf")}))
		}, "entry 2 (file " + h.dir + "/x.conf by module overcommit): no module overcommit changes files or kernel values"},
		{"run id of another directory", func(t *testing.T) []byte {
			return tamper(t, func(j map[string]any) { j["run_id"] = "20200101T000000Z-000000" })
		}, "run id 20200101T000000Z-000000 does not match its directory \"" + r.RunID + "\""},
		{"not JSON", func(t *testing.T) []byte { return []byte("{\"run_id\": ") }, "not a pgtune journal"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(journal, tc.journal(t), 0o600); err != nil {
				t.Fatal(err)
			}
			code, r, stderr := mustRunWith(t, mods, "rollback", "--yes", "-i", h.inv)
			msg := hostError(r)
			if code != 1 || !strings.Contains(msg, tc.want) || !strings.Contains(msg, "journal "+journal) {
				t.Errorf("rollback: exit %d error %q\nwant exit 1 naming %s and %q\n%s", code, msg, journal, tc.want, stderr)
			}
			if got := readString(t, h.file); got != "new\n" {
				t.Errorf("a refused rollback changed %s: %q", h.file, got)
			}
			if readString(t, "/etc/passwd") != passwd {
				t.Fatal("a refused rollback changed /etc/passwd")
			}
		})
	}

	if err := os.WriteFile(journal, genuine, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, r, stderr := mustRunWith(t, mods, "rollback", "--yes", "-i", h.inv); code != 0 || readString(t, h.file) != "old\n" {
		t.Fatalf("rollback from the genuine journal: exit %d %q, file %q\n%s", code, hostError(r), readString(t, h.file), stderr)
	}
}

// TestRollbackRefusesForgedKernelKey: after a real apply (the real
// modules, a PostgreSQL 15 cluster, this machine's kernel over sshd), a
// journal entry that would set kernel.core_pattern (recorded as
// overcommit's) or put back /etc/passwd (as pgconf's) makes rollback
// refuse the host: the kernel values and files stay as apply left them.
// The genuine journal then rolls the host back.
func TestRollbackRefusesForgedKernelKey(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: real sshd, PostgreSQL and kernel")
	}
	// The servers first, the kernel lock after: building them needs no
	// lock (others' kernel tests need not wait on it), and StopOnCleanup
	// stops postgres before the lock goes.
	sshd := testhost.SSHD(t)
	pg := testhost.Postgres(t)
	kernel := testhost.LockKernel(t)
	testhost.StopOnCleanup(t, pg)
	work := t.TempDir()
	sysctlDir := filepath.Join(work, "sysctl.d")
	stateDir := filepath.Join(work, "state")
	inv := filepath.Join(work, "inventory.yml")
	writeFile(t, inv, "all:\n  children:\n    postgres:\n      hosts:\n"+sshdHost("db1", sshd,
		"pg_data: "+pg.DataDir, "pg_bin: "+pg.BinDir)+
		fmt.Sprintf("      vars:\n        sysctl_dir: %s\n        pgtune_state_dir: %s\n", sysctlDir, stateDir))
	// Room for 128 MiB (one page of a larger default size) beside what
	// the pool holds; neither preflight's verdict is left to this
	// machine's free memory.
	pool, _ := kernel.RoomFor(128 << 20)
	book := filepath.Join(work, "memory.yml")
	writeFile(t, book, fmt.Sprintf(`- name: kernel side
  hosts: postgres
  policy:
    hugepages:
      pool: %d
      min_available: 0
      sysctl_file: "${vars.sysctl_dir}/10-hugepages.conf"
    overcommit:
      ratio: 0.8
      headroom: "${8 * GiB}"
      max_committed: 1
      # A loose limit on purpose (it must not bite the test machine).
      accept_unprotective: true
      sysctl_file: "${vars.sysctl_dir}/99-overcommit.conf"
`, pool))
	corePattern := func() string {
		v, err := testhost.ReadSysctl("kernel.core_pattern")
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	before := snapshot(t, pg, sysctlDir)
	core := corePattern()

	if code, r, stderr := pgtune(t, "apply", "--yes", "-i", inv, book); code != 0 {
		t.Fatalf("apply: exit %d %+v\n%s", code, r, stderr)
	}
	journals, _ := filepath.Glob(filepath.Join(stateDir, "*", "journal.json"))
	if len(journals) != 1 {
		t.Fatalf("journals after one apply: %v", journals)
	}
	journal := journals[0]
	genuine, err := os.ReadFile(journal)
	if err != nil {
		t.Fatal(err)
	}
	applied := snapshot(t, pg, sysctlDir)
	passwd := readString(t, "/etc/passwd")
	runDir := filepath.Dir(journal)

	forge := func(t *testing.T, e map[string]any) {
		var j map[string]any
		if err := json.Unmarshal(genuine, &j); err != nil {
			t.Fatal(err)
		}
		j["entries"] = append(j["entries"].([]any), e)
		b, _ := json.MarshalIndent(j, "", "  ")
		if err := os.WriteFile(journal, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name  string
		entry map[string]any
		want  string
	}{
		{"kernel.core_pattern", map[string]any{"kind": "sysctl", "module": "overcommit", "key": "kernel.core_pattern", "before": "|/bin/false %p"},
			"(sysctl kernel.core_pattern = \"|/bin/false %p\" by module overcommit): module overcommit does not manage it on this host"},
		{"/etc/passwd", map[string]any{"kind": "file", "module": "pgconf", "path": "/etc/passwd", "existed": true,
			"backup": filepath.Join(runDir, "files", "etc", "passwd")},
			"(file /etc/passwd by module pgconf): module pgconf does not manage it on this host"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			forge(t, tc.entry)
			code, r, stderr := pgtune(t, "rollback", "--yes", "-i", inv)
			msg := ""
			if r.Hosts[0].Error != nil {
				msg = *r.Hosts[0].Error
			}
			if code != 1 || !strings.Contains(msg, tc.want) || !strings.Contains(msg, "refusing to roll back") {
				t.Errorf("rollback: exit %d error %q\nwant exit 1 and %q\n%s", code, msg, tc.want, stderr)
			}
			if now := snapshot(t, pg, sysctlDir); !reflect.DeepEqual(now.Kernel, applied.Kernel) || !reflect.DeepEqual(now.Files, applied.Files) {
				t.Errorf("a refused rollback changed the host:\nkernel %v → %v", applied.Kernel, now.Kernel)
			}
			if corePattern() != core || readString(t, "/etc/passwd") != passwd {
				t.Fatal("a refused rollback changed kernel.core_pattern or /etc/passwd")
			}
		})
	}

	if err := os.WriteFile(journal, genuine, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, r, stderr := pgtune(t, "rollback", "--yes", "-i", inv); code != 0 {
		t.Fatalf("rollback from the genuine journal: exit %d %+v\n%s", code, r, stderr)
	}
	if after := snapshot(t, pg, sysctlDir); !reflect.DeepEqual(after.Kernel, before.Kernel) {
		t.Errorf("kernel after rollback %v, want %v", after.Kernel, before.Kernel)
	}
}

// TestRollbackRunIDChecked: --run names a directory on every host, so
// anything but a run id is refused before any host is contacted.
func TestRollbackRunIDChecked(t *testing.T) {
	for _, id := range []string{"../../etc", "a/b", ".hidden", "x\n"} {
		var stdout, stderr bytes.Buffer
		app := newApp()
		app.Stdout, app.Stderr = &stdout, &stderr
		app.Dial = func(context.Context, *inventory.Host) (transport.Transport, error) {
			t.Fatalf("--run %q: a host was contacted", id)
			return nil, nil
		}
		if code := app.Run([]string{"rollback", "--yes", "--run", id}); code != 1 || !strings.Contains(stderr.String(), "not a run id") {
			t.Errorf("--run %q: exit %d, stderr %q", id, code, stderr.String())
		}
	}
}

// TestLockFreedWhenConnectionDrops: the first run's connection goes away
// while it holds the lock (as when its controller dies): the holder on
// the host notices, the lock is freed, and the next run gets it; the
// first run stops without changing anything. Logged in as root, and as a
// user with become through sudo.
func TestLockFreedWhenConnectionDrops(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: real sshd and sudo")
	}
	testhost.WatchKernel(t) // every run gathers this machine's facts
	for _, user := range []string{"root", "pgtune-sudo"} {
		t.Run(user, func(t *testing.T) {
			if user != "root" {
				testhost.EnsureUser(t, user, true)
			}
			h := newGateHostAs(t, "new\n", user)
			writeFile(t, h.file, "old\n")
			first := &gate{dir: h.dir, entered: make(chan struct{}), release: make(chan struct{})}
			defer close(first.release)
			var mu sync.Mutex
			var conns []transport.Transport
			app := newApp()
			app.Modules = []engine.Module{first}
			app.Stdin, app.Stdout, app.Stderr = strings.NewReader(""), &bytes.Buffer{}, &bytes.Buffer{}
			app.Dial = func(ctx context.Context, host *inventory.Host) (transport.Transport, error) {
				tr, err := engine.Dial(ctx, host)
				mu.Lock()
				defer mu.Unlock()
				conns = append(conns, tr)
				return tr, err
			}
			done := make(chan int, 1)
			go func() { done <- app.Run([]string{"apply", "--yes", "-i", h.inv, h.book}) }()
			<-first.entered
			mu.Lock()
			for _, c := range conns {
				c.Close()
			}
			mu.Unlock()
			if code := <-done; code != 1 {
				t.Errorf("the run whose connection dropped: exit %d, want 1", code)
			}
			if got := readString(t, h.file); got != "old\n" {
				t.Errorf("the run whose connection dropped changed the file: %q", got)
			}
			code, next, stderr := mustRunWith(t, []engine.Module{&gate{dir: h.dir}}, "apply", "--yes", "-i", h.inv, h.book)
			if code != 0 || next.Hosts[0].Status != "changed" || readString(t, h.file) != "new\n" {
				t.Fatalf("next apply: exit %d status %s error %q\n%s", code, next.Hosts[0].Status, hostError(next), stderr)
			}
		})
	}
}
