package engine

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/inventory"
	"github.com/pgtune/pgtune/engine/plan"
	"github.com/pgtune/pgtune/engine/report"
	"github.com/pgtune/pgtune/engine/transport"
)

func TestSecretsOf(t *testing.T) {
	tests := []struct {
		name string
		vars map[string]any
		want []string
	}{
		{"none", map[string]any{"pg_data": "/d", "sysctl_dir": "/s"}, nil},
		{"suffixes", map[string]any{"db_password": "hunter2", "api_token": "tok-1", "vault_SECRET": "v", "password_hint": "no"}, []string{"hunter2", "tok-1", "v"}},
		{"listed", map[string]any{SensitiveVar: []any{"dsn", "keys"}, "dsn": "postgres://u:pw@h", "keys": []any{"k1", map[string]any{"x": "k2"}}, "other": "plain"},
			[]string{"postgres://u:pw@h", "k1", "k2"}},
		{"single name", map[string]any{SensitiveVar: "dsn", "dsn": "abc"}, []string{"abc"}},
		{"other spellings", map[string]any{"password": "pw0", "db_passwd": "pw1", "MYSQL_PWD": "pw2", "aws_secret_access_key": "pw3", "stripe_api_key": "pw4", "partition_key": "id", "token_ttl": "60"},
			[]string{"pw0", "pw1", "pw2", "pw3", "pw4"}},
		{"numbers and empties", map[string]any{"pin_secret": 4711, "empty_token": ""}, []string{"4711"}},
		{"longest first", map[string]any{"a_token": "abc", "b_token": "abcdef"}, []string{"abcdef", "abc"}},
		{"ansible passwords", map[string]any{"ansible_become_pass": "b3come", "ansible_password": "l0gin", "ansible_ssh_passphrase": "k3y"}, []string{"b3come", "l0gin", "k3y"}},
		{"pg_restart credentials", map[string]any{"pg_restart": "PGPASSWORD='s3 cr3t' PGPORT=5433 pg_ctlcluster 15 main restart"}, []string{"'s3 cr3t'", "s3 cr3t"}},
		{"pg_restart without credentials", map[string]any{"pg_restart": "systemctl restart postgresql"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := secretsOf(tc.vars); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("secretsOf = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestMarkSensitive(t *testing.T) {
	secrets := []string{"hunter2"}
	p := &plan.ModulePlan{Module: "m", Notes: []string{"uses hunter2 here", "plain"}}
	p.Changes = []plan.Change{
		{Target: "/etc/a.conf", Before: "", After: "password = hunter2\n", Diff: "+password = hunter2"},
		{Target: "/etc/hunter2.conf", Before: "x", After: "y"},
		{Target: "vm.nr_hugepages", Before: "0", After: "64"},
	}
	markSensitive(p, secrets)
	if !p.Changes[0].Sensitive || !p.Changes[1].Sensitive || p.Changes[2].Sensitive {
		t.Errorf("sensitive flags %v %v %v, want true true false", p.Changes[0].Sensitive, p.Changes[1].Sensitive, p.Changes[2].Sensitive)
	}
	if p.Changes[1].Target != "/etc/hunter2.conf" {
		t.Errorf("the plan's target must stay usable by the module: %q", p.Changes[1].Target)
	}
	if p.Notes[0] != "uses (sensitive) here" || p.Notes[1] != "plain" {
		t.Errorf("notes %q", p.Notes)
	}
}

func TestRedactLoggerAndErrors(t *testing.T) {
	var buf bytes.Buffer
	secrets := []string{"hunter2"}
	log := redactLogger(slog.New(slog.NewTextHandler(&buf, nil)), secrets).With("dsn", "u:hunter2@h")
	base := errors.New("pg_restart failed: PGPASSWORD=hunter2 exit 1")
	log.Error("restart hunter2", "err", base, slog.Group("g", "k", "hunter2"), "n", 1)
	if out := buf.String(); strings.Contains(out, "hunter2") || !strings.Contains(out, "(sensitive)") {
		t.Errorf("log line leaks or masks nothing: %s", out)
	}
	buf.Reset()
	log.Info("path", "pg_data", "/srv/\x1b[2K\rdb1: in policy hunter2")
	if out := buf.String(); strings.ContainsAny(out, "\x1b\r") || strings.Contains(out, "hunter2") || !strings.Contains(out, `x1b[2K`) {
		t.Errorf("host text reaches the log raw: %q", out)
	}
	f := redactFacts(&facts.Facts{Hostname: "db", PostgresError: `pg_data /srv/"hunter2": no such directory`}, secrets)
	if strings.Contains(f.PostgresError, "hunter2") || f.Hostname != "db" {
		t.Errorf("facts: %+v", f)
	}
}

// Secrets the inventory does not name are masked by their structure in
// notes, errors, facts and logs.
func TestStructuralMasking(t *testing.T) {
	p := &plan.ModulePlan{Module: "pgconf", Notes: []string{"standby of host=db0 user=rep password=s3cr3t"}}
	markSensitive(p, nil)
	if p.Notes[0] != "standby of host=db0 user=rep password=(sensitive)" {
		t.Errorf("note %q", p.Notes[0])
	}
	if got := redact("restart postgres: PGPASSWORD=s3cr3t pg_ctl: exit status 1; then hunter2", []string{"hunter2"}); got != "restart postgres: PGPASSWORD=(sensitive) pg_ctl: exit status 1; then (sensitive)" {
		t.Errorf("redact = %q", got)
	}
	f := redactFacts(&facts.Facts{Hostname: "db", PostgresError: "connect postgresql://rep:s3cr3t@db0/x: refused",
		Sysctl: map[string]string{"vm.overcommit_memory": "2"}, MemTotal: 1<<60 + 1}, nil)
	if strings.Contains(f.PostgresError, "s3cr3t") || f.Sysctl["vm.overcommit_memory"] != "2" || f.Hostname != "db" || f.MemTotal != 1<<60+1 {
		t.Errorf("facts: %+v", f)
	}
	same := &facts.Facts{Hostname: "db"}
	if redactFacts(same, nil) != same {
		t.Error("facts with nothing to mask are copied")
	}
	var buf bytes.Buffer
	log := redactLogger(slog.New(slog.NewTextHandler(&buf, nil)), []string{"unrelated"})
	log.Info("restart", "cmd", "PGPASSWORD=s3cr3t pg_ctl restart", "err", errors.New("password=s3cr3t: no"))
	if strings.Contains(buf.String(), "s3cr3t") {
		t.Errorf("log leaks: %s", buf.String())
	}
}

// Rollback masks the inventory's secrets like check and apply do: in the
// host's error and in its log lines.
func TestRollbackMasksInventorySecrets(t *testing.T) {
	var buf bytes.Buffer
	r := &Runner{
		Forks: 1,
		Log:   slog.New(slog.NewTextHandler(&buf, nil)),
		Dial: func(context.Context, *inventory.Host) (transport.Transport, error) {
			return nil, errors.New("proxy said: bad token tok-8c1f9e")
		},
	}
	h := &inventory.Host{Name: "db1", Vars: map[string]any{"vault_token": "tok-8c1f9e"}}
	s := r.PlanRollback(context.Background(), []*inventory.Host{h}, "")
	defer s.Close()
	rep := s.Report("apply")
	if e := rep.Hosts[0].Error; e == nil || strings.Contains(*e, "tok-8c1f9e") || !strings.Contains(*e, report.Masked) {
		t.Errorf("rollback's host error: %v", e)
	}
	if strings.Contains(buf.String(), "tok-8c1f9e") {
		t.Errorf("rollback's log leaks the token: %s", buf.String())
	}
}
