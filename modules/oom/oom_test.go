package oom

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/expr"
	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/plan"
	"github.com/pgtune/pgtune/engine/playbook"
	"github.com/pgtune/pgtune/engine/transport"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// fakeHost answers readScript with a canned report and records every
// other command; writeAdjScript fails with exit 4 when refuse is set.
type fakeHost struct {
	report string
	refuse bool
	ran    []string
}

func (f *fakeHost) Run(_ context.Context, c transport.Command) (transport.Result, error) {
	if len(c.Args) > 2 && c.Args[2] == readScript {
		return transport.Result{Stdout: []byte(f.report)}, nil
	}
	if len(c.Args) > 2 && c.Args[2] == writeAdjScript {
		f.ran = append(f.ran, "write "+strings.Join(c.Args[4:], " "))
		if f.refuse {
			r := transport.Result{ExitCode: 4, Stderr: []byte("Permission denied")}
			return r, &transport.ExitError{Command: "sh", Result: r}
		}
		return transport.Result{}, nil
	}
	f.ran = append(f.ran, strings.Join(c.Args, " "))
	return transport.Result{}, nil
}
func (f *fakeHost) Close() error { return nil }

const fullCaps = "000001ffffffffff"

func running() *facts.Postgres {
	return &facts.Postgres{DataDir: "/var/lib/postgresql/15/main", ConfigFile: "/etc/postgresql/15/main/postgresql.conf",
		Major: 15, Owner: "postgres", Running: true, PID: 4242, StartTime: 777, Cluster: "main"}
}

func target(h *fakeHost, pg *facts.Postgres) *engine.Target {
	return &engine.Target{Name: "db1", Transport: h, Facts: &facts.Facts{Postgres: pg}, Scope: expr.NewScope("policy.yml")}
}

func check(t *testing.T, h *fakeHost, pg *facts.Postgres, adj int64, sd string) *plan.ModulePlan {
	t.Helper()
	p := &Params{PostmasterScoreAdj: expr.Literal(adj), Systemd: expr.Literal(sd)}
	mp, err := New().Check(context.Background(), target(h, pg), p)
	if err != nil {
		t.Fatal(err)
	}
	return mp
}

func changes(p *plan.ModulePlan) []string {
	var out []string
	for _, c := range p.Changes {
		if c.Kind == plan.KindFile {
			out = append(out, "file "+c.Target)
			continue
		}
		out = append(out, c.Target+": "+c.Before+" → "+c.After)
	}
	return out
}

func TestCheck(t *testing.T) {
	withEnv := "pm_env_PG_OOM_ADJUST_FILE=/proc/self/oom_score_adj\npm_env_PG_OOM_ADJUST_VALUE=0\n"
	unit := "unit=postgresql@15-main.service\nunit_LoadState=loaded\nunit_MainPID=4242\nunit_OOMPolicy=stop\nunit_OOMScoreAdjust=-900\n"
	for _, tc := range []struct {
		name    string
		report  string
		sd      string
		want    []string
		restart bool
		note    string
	}{
		{name: "no environment: shield only at the restart",
			report: "systemd=0\ncapeff=" + fullCaps + "\npm_start=777\npm_adj=0\nchild=4243 0\n",
			want:   []string{"postmaster pid 4242 oom_score_adj (at the restart): 0, PG_OOM_ADJUST_FILE unset → -1000, PG_OOM_ADJUST_FILE=/proc/self/oom_score_adj PG_OOM_ADJUST_VALUE=0"}, restart: true},
		{name: "environment in place: set live",
			report: "systemd=0\ncapeff=" + fullCaps + "\npm_start=777\npm_adj=0\n" + withEnv + "child=4243 0\n",
			want:   []string{"postmaster pid 4242 oom_score_adj: 0 → -1000"}},
		{name: "in policy",
			report: "systemd=0\ncapeff=" + fullCaps + "\npm_start=777\npm_adj=-1000\n" + withEnv + "child=4243 0\n"},
		{name: "shield inherited: worse than none",
			report:  "systemd=0\ncapeff=" + fullCaps + "\npm_start=777\npm_adj=-1000\nchild=4243 -1000\n",
			want:    []string{"postmaster pid 4242 oom_score_adj (at the restart): -1000, PG_OOM_ADJUST_FILE unset → -1000, PG_OOM_ADJUST_FILE=/proc/self/oom_score_adj PG_OOM_ADJUST_VALUE=0"},
			restart: true, note: "worse than no shield"},
		{name: "no CAP_SYS_RESOURCE",
			report: "systemd=0\ncapeff=000001fffeffffff\npm_start=777\npm_adj=0\nchild=4243 0\n",
			note:   "CAP_SYS_RESOURCE"},
		{name: "raising needs no capability",
			report: "systemd=0\ncapeff=0\npm_start=777\npm_adj=0\n" + withEnv + "child=4243 0\n", sd: "auto",
			want: []string{"postmaster pid 4242 oom_score_adj: 0 → 300"}},
		{name: "systemd unit runs it: drop-in, live shield",
			report: "systemd=1\ncapeff=" + fullCaps + "\npm_start=777\npm_adj=-900\n" + withEnv + "child=4243 0\n" + unit,
			want:   []string{"file /etc/systemd/system/postgresql@15-main.service.d/pgtune-oom.conf", "postmaster pid 4242 oom_score_adj: -900 → -1000"}},
		{name: "systemd off",
			report: "systemd=1\ncapeff=" + fullCaps + "\npm_start=777\npm_adj=-1000\n" + withEnv + "child=4243 0\n" + unit, sd: "off"},
		{name: "in a unit's cgroup but not its main process",
			report: "systemd=1\ncapeff=" + fullCaps + "\npm_start=777\npm_adj=-1000\n" + withEnv + "child=4243 0\n" +
				"unit=ssh.service\nunit_LoadState=loaded\nunit_MainPID=600\nunit_OOMPolicy=stop\n",
			note: "not its main process"},
		{name: "drop-in in place, reload pending",
			report: "systemd=1\ncapeff=" + fullCaps + "\npm_start=777\npm_adj=-1000\n" + withEnv + "child=4243 0\n" + unit + "--- dropin\n" + string(dropinContent(-1000)),
			want:   []string{"systemctl daemon-reload (postgresql@15-main.service): OOMPolicy=stop → OOMPolicy=continue"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			adj := int64(-1000)
			if strings.HasPrefix(tc.name, "raising") {
				adj = 300
			}
			sd := tc.sd
			if sd == "" {
				sd = "auto"
			}
			p := check(t, &fakeHost{report: tc.report}, running(), adj, sd)
			if got := changes(p); strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("changes:\n got %q\nwant %q", got, tc.want)
			}
			if got := p.Outputs[OutRestart]; got != tc.restart {
				t.Errorf("restart output %v, want %v", got, tc.restart)
			}
			if tc.note != "" && !strings.Contains(strings.Join(p.Notes, "\n"), tc.note) {
				t.Errorf("notes %q lack %q", p.Notes, tc.note)
			}
		})
	}
}

// TestPositiveScoreWhereRootMayLower: a score above 0 written with
// CAP_SYS_RESOURCE (pgtune's root live, systemd's for the drop-in) is also
// the kernel's oom_score_adj_min of the postmaster and every child forked
// later: the backends' reset to 0 would fail. Refused there, running or
// stopped; where root lacks the capability the raise sets no floor and is
// planned (TestCheck, "raising needs no capability").
func TestPositiveScoreWhereRootMayLower(t *testing.T) {
	stopped := running()
	stopped.Running, stopped.PID, stopped.StartTime = false, 0, 0
	for name, tc := range map[string]struct {
		pg     *facts.Postgres
		report string
	}{
		"running":               {running(), "systemd=0\ncapeff=" + fullCaps + "\npm_start=777\npm_adj=0\nchild=4243 0\n"},
		"stopped, systemd unit": {stopped, "systemd=1\ncapeff=" + fullCaps + "\nunit=postgresql@15-main.service\nunit_LoadState=loaded\nunit_MainPID=0\nunit_OOMPolicy=stop\n"},
	} {
		t.Run(name, func(t *testing.T) {
			h := &fakeHost{report: tc.report}
			p := &Params{PostmasterScoreAdj: expr.Literal(int64(300)), Systemd: expr.Literal("auto")}
			_, err := New().Check(context.Background(), target(h, tc.pg), p)
			if err == nil || !strings.Contains(err.Error(), "oom_score_adj_min") {
				t.Fatalf("err %v, want a refusal naming oom_score_adj_min", err)
			}
		})
	}
}

func TestCheckStoppedDebianCluster(t *testing.T) {
	pg := running()
	pg.Running, pg.PID, pg.StartTime = false, 0, 0
	h := &fakeHost{report: "systemd=1\ncapeff=" + fullCaps + "\nunit=postgresql@15-main.service\nunit_LoadState=loaded\nunit_MainPID=0\nunit_OOMPolicy=stop\n"}
	p := check(t, h, pg, -1000, "auto")
	if got := changes(p); len(got) != 1 || got[0] != "file /etc/systemd/system/postgresql@15-main.service.d/pgtune-oom.conf" {
		t.Fatalf("changes %q", got)
	}
	if p.Outputs[OutRestart] != false {
		t.Errorf("a stopped cluster needs no restart")
	}
}

func TestApplySetsLiveAndJournalsIt(t *testing.T) {
	h := &fakeHost{report: "systemd=0\ncapeff=" + fullCaps + "\npm_start=777\npm_adj=0\npm_env_PG_OOM_ADJUST_FILE=/proc/self/oom_score_adj\nchild=4243 0\n"}
	tg := target(h, running())
	p, err := New().Check(context.Background(), tg, New().NewParams())
	if err != nil {
		t.Fatal(err)
	}
	if err := New().Apply(context.Background(), tg, p); err != nil {
		t.Fatal(err)
	}
	if want := "write 4242 777 -1000"; len(h.ran) != 1 || h.ran[0] != want {
		t.Errorf("ran %q, want %q", h.ran, want)
	}
	h.refuse = true
	err = New().Apply(context.Background(), tg, p)
	if err == nil || !strings.Contains(err.Error(), "CAP_SYS_RESOURCE") {
		t.Errorf("a refused write: %v", err)
	}
}

// TestParseHostRefuses: what the host reports is input; anything that is
// not what readScript prints is refused, never guessed at.
func TestParseHostRefuses(t *testing.T) {
	for name, out := range map[string]string{
		"unknown key":        "systemd=0\nbogus=1\n",
		"twice":              "systemd=0\npm_adj=0\npm_adj=-1000\n",
		"adj out of range":   "pm_adj=-1001\n",
		"adj not a number":   "pm_adj=0x10\n",
		"child pid":          "child=0 0\n",
		"child value":        "child=12 5000\n",
		"unit with a slash":  "unit=../../etc/passwd.service\n",
		"unit not service":   "unit=sshd.socket\n",
		"no equals":          "garbage\n",
		"capeff":             "capeff=zz\n",
		"env with a space":   "pm_env_PG_OOM_ADJUST_FILE=/proc/self/x y\n",
		"props without unit": "unit_LoadState=loaded\n",
	} {
		if _, err := parseHost(out); err == nil {
			t.Errorf("%s: accepted %q", name, out)
		}
	}
	h, err := parseHost("systemd=1\ncapeff=1000000\npm_start=5\npm_adj=-1000\npm_env_PG_OOM_ADJUST_FILE=/proc/self/oom_score_adj\nchild=7 0\nchild=8 -1000\nunit=postgresql@15-main.service\nunit_MainPID=9\n")
	if err != nil {
		t.Fatal(err)
	}
	if !h.Systemd || !h.CanLower || h.Adj != -1000 || !h.resets() || len(h.Children) != 2 || h.inheriting() != 1 || h.UnitMainPID != 9 {
		t.Errorf("parsed %+v", h)
	}
}

func TestValidate(t *testing.T) {
	mods, reg := engine.Registry(New())
	for _, tc := range []struct{ yaml, want string }{
		{"postmaster_score_adj: -1000\n      systemd: auto", ""},
		{"postmaster_score_adj: 1001", "x.yml:5:29: postmaster_score_adj: 1001 is not in [-1000, 1000]"},
		{"postmaster_score_adj: \"${-2000}\"", "x.yml:5:30: postmaster_score_adj: -2000 is not in [-1000, 1000]"},
		{"systemd: yes", "x.yml:5:16: systemd: \"yes\" is not auto or off"},
		{"systemd: \"${false}\"", ""},                        // an inventory var written off (YAML 1.1: false)
		{"postmaster_score_adj: \"${facts.mem_total}\"", ""}, // needs a host: checked there
	} {
		src := "- hosts: all\n  policy:\n    oom:\n      \n      " + tc.yaml + "\n"
		book, err := playbook.Parse("x.yml", []byte(src), reg)
		if err != nil {
			t.Fatalf("%s: %v", tc.yaml, err)
		}
		err = engine.ValidatePolicy(book, mods)
		got := ""
		if err != nil {
			got = strings.TrimPrefix(err.Error(), "oom: ")
		}
		if got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.yaml, got, tc.want)
		}
	}
}

func TestManages(t *testing.T) {
	m := New()
	for target, want := range map[string]bool{
		"/etc/systemd/system/postgresql@15-main.service.d/pgtune-oom.conf": true,
		"/etc/systemd/system/ssh.service.d/override.conf":                  false,
		"/etc/systemd/system/pgtune-oom.conf":                              false,
		"/etc/passwd":                                                      false,
		"/etc/systemd/system/x.service.d/../../passwd.d/pgtune-oom.conf":   false,
	} {
		if got := m.Manages(nil, "file", target); got != want {
			t.Errorf("file %s: %v, want %v", target, got, want)
		}
	}
	if !m.Manages(nil, "live", "oom_score_adj:postmaster:42:77") || m.Manages(nil, "live", "oom_score_adj:sshd:42:77") || m.Manages(nil, "sysctl", "vm.overcommit_memory") {
		t.Error("live keys")
	}
}

// TestDropinGolden: the drop-in as rendered, and systemd's own parser
// (systemd-analyze verify, offline) has nothing to say about it while it
// does complain about a broken one.
func TestDropinGolden(t *testing.T) {
	got := dropinContent(-1000)
	golden := filepath.Join("testdata", "dropin.golden")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("drop-in:\n%s\nwant:\n%s", got, want)
	}
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Skip("systemd-analyze not installed")
	}
	if msg := verifyUnit(t, got); strings.Contains(msg, dropinName) {
		t.Errorf("systemd-analyze verify: %s", msg)
	}
	if msg := verifyUnit(t, []byte("[Service]\nOOMPolicy=sometimes\n")); !strings.Contains(msg, dropinName) {
		t.Errorf("systemd-analyze verify took a broken drop-in without a word: %q", msg)
	}
}

// verifyUnit runs systemd-analyze verify on a forking unit shaped like
// Debian's postgresql@.service with dropin in its drop-in directory.
func verifyUnit(t *testing.T, dropin []byte) string {
	dir := t.TempDir()
	unit := filepath.Join(dir, "pgtune-test.service")
	if err := os.WriteFile(unit, []byte("[Unit]\nDescription=test\n[Service]\nType=forking\nExecStart=/bin/true\nPIDFile=/run/pgtune-test.pid\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(unit+".d", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(unit+".d", dropinName), dropin, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("systemd-analyze", "verify", unit)
	cmd.Env = append(os.Environ(), "SYSTEMD_UNIT_PATH="+dir+":")
	out, _ := cmd.CombinedOutput()
	return string(out)
}

func TestApplyWritesDropinAndReloads(t *testing.T) {
	unit := "unit=postgresql@15-main.service\nunit_LoadState=loaded\nunit_MainPID=4242\nunit_OOMPolicy=stop\n"
	h := &fakeHost{report: "systemd=1\ncapeff=" + fullCaps + "\npm_start=777\npm_adj=-900\npm_env_PG_OOM_ADJUST_FILE=/proc/self/oom_score_adj\nchild=4243 0\n" + unit}
	tg := target(h, running())
	p, err := New().Check(context.Background(), tg, New().NewParams())
	if err != nil {
		t.Fatal(err)
	}
	if err := New().Apply(context.Background(), tg, p); err != nil {
		t.Fatal(err)
	}
	dropin := "/etc/systemd/system/postgresql@15-main.service.d/pgtune-oom.conf"
	var steps []string
	for _, r := range h.ran {
		switch {
		case strings.Contains(r, " "+dropin+" "):
			steps = append(steps, "write drop-in")
		case strings.Contains(r, " /etc/systemd/system/postgresql@15-main.service.d "):
			steps = append(steps, "mkdir")
		default:
			steps = append(steps, r)
		}
	}
	want := []string{"mkdir", "write drop-in", "systemctl daemon-reload", "write 4242 777 -1000"}
	if strings.Join(steps, "|") != strings.Join(want, "|") {
		t.Errorf("steps %q, want %q", steps, want)
	}
}

// TestVerifyUnit: verify reads the unit's properties back and names the
// one another drop-in overrides.
func TestVerifyUnit(t *testing.T) {
	env := "pm_env_PG_OOM_ADJUST_FILE=/proc/self/oom_score_adj\nchild=4243 0\n"
	base := "systemd=1\ncapeff=" + fullCaps + "\npm_start=777\npm_adj=-1000\n" + env + "unit=postgresql@15-main.service\nunit_LoadState=loaded\nunit_MainPID=4242\n"
	h := &fakeHost{report: base + "unit_OOMPolicy=stop\nunit_OOMScoreAdjust=-900\n"}
	tg := target(h, running())
	p, err := New().Check(context.Background(), tg, New().NewParams())
	if err != nil {
		t.Fatal(err)
	}
	dropin := "--- dropin\n" + string(dropinContent(-1000))
	for report, want := range map[string]string{
		base + "unit_OOMPolicy=continue\nunit_OOMScoreAdjust=-1000\n" + dropin: "",
		base + "unit_OOMPolicy=stop\nunit_OOMScoreAdjust=-1000\n" + dropin:     "OOMPolicy postgresql@15-main.service says stop",
		base + "unit_OOMPolicy=continue\nunit_OOMScoreAdjust=-900\n" + dropin:  "OOMScoreAdjust postgresql@15-main.service says -900",
		base + "unit_OOMPolicy=continue\nunit_OOMScoreAdjust=-1000\n":          "does not hold the planned content",
	} {
		h.report = report
		err := New().Verify(context.Background(), tg, p)
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("verify: %v, want %q", err, want)
		}
	}
}

// The read the module declares to run ahead is, with the postmaster's pid
// in place, the very command Check runs for a running postmaster: so
// Check takes the gather's answer and asks the host nothing.
func TestCheckTakesTheReadRunAhead(t *testing.T) {
	runs := New().FactSet().PostmasterRuns
	if err := facts.CheckSets([]facts.Set{New().FactSet()}); err != nil || len(runs) != 1 {
		t.Fatalf("FactSet: %v, %d runs", err, len(runs))
	}
	args := append([]string(nil), runs[0]...)
	for i, a := range args {
		if a == facts.PMPid {
			args[i] = "4242"
		}
	}
	ran := &facts.Ran{}
	ran.Keep(args, false, transport.Result{Stdout: []byte("systemd=0\ncapeff=" + fullCaps + "\npm_start=777\npm_adj=0\nchild=4243 0\n")})
	h := &fakeHost{report: "unreadable"} // a read on the host would fail Check
	tg := target(h, running())
	tg.Facts.Ran = ran
	mp, err := New().Check(context.Background(), tg, &Params{PostmasterScoreAdj: expr.Literal(int64(-1000)), Systemd: expr.Literal("auto")})
	if err != nil {
		t.Fatal(err)
	}
	if got := changes(mp); len(got) != 1 || !strings.Contains(got[0], "oom_score_adj (at the restart): 0") {
		t.Errorf("changes %q; want the plan from the answer run ahead", got)
	}
	if len(h.ran) != 0 || ran.Len() != 0 {
		t.Errorf("host asked %q, %d answers left; want the answer taken and nothing asked", h.ran, ran.Len())
	}
}
