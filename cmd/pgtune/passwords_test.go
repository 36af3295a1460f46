package main

import (
	"bytes"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func TestPasswordFlags(t *testing.T) {
	var p passwordFlags
	fs := pflag.NewFlagSet("check", pflag.ContinueOnError)
	fs.StringP("inventory", "i", "", "")
	passwordFlagsOn(fs, &p)
	if err := fs.Parse([]string{"-i", "h,", "-k", "--ask-become-pass", "book.yml", "--", "-K"}); err != nil {
		t.Fatal(err)
	}
	if rest := fs.Args(); !p.login || !p.become || !reflect.DeepEqual(rest, []string{"book.yml", "-K"}) {
		t.Fatalf("rest %q, flags %+v", rest, p)
	}
}

// The prompted passwords go to every host whose inventory sets none; an
// empty become password defaults to the login one, as in Ansible.
func TestAskPasswords(t *testing.T) {
	work := t.TempDir()
	inv := filepath.Join(work, "hosts")
	writeFile(t, inv, "[db]\ndb1\ndb2 ansible_password=own ansible_become_pass=ownsudo\n")
	for _, tc := range []struct {
		answers             []string
		db1Login, db1Become string
		db2Login, db2Become string
		prompts             []string
	}{
		{[]string{"typed", ""}, "typed", "typed", "own", "ownsudo", []string{"SSH password: ", "BECOME password [defaults to SSH password]: "}},
		{[]string{"typed", "sudo-typed"}, "typed", "sudo-typed", "own", "ownsudo", nil},
	} {
		a := newApp()
		var prompts []string
		answers := tc.answers
		a.ReadPassword = func(p string) (string, error) {
			prompts = append(prompts, p)
			ans := answers[0]
			answers = answers[1:]
			return ans, nil
		}
		var stderr bytes.Buffer
		a.Stderr = &stderr
		a.passwords = passwordFlags{login: true, become: true}
		o, err := a.parse("check", []string{"-i", inv}, 1, targetFlags)
		if err != nil {
			t.Fatal(err)
		}
		got, err := a.openInventory(o, "")
		if err != nil {
			t.Fatal(err)
		}
		db1, _ := got.Host("db1")
		db2, _ := got.Host("db2")
		if db1.Conn.Password != tc.db1Login || db1.Conn.BecomePassword != tc.db1Become ||
			db2.Conn.Password != tc.db2Login || db2.Conn.BecomePassword != tc.db2Become {
			t.Errorf("%v: db1 %q/%q db2 %q/%q", tc.answers, db1.Conn.Password, db1.Conn.BecomePassword, db2.Conn.Password, db2.Conn.BecomePassword)
		}
		if tc.prompts != nil && !reflect.DeepEqual(prompts, tc.prompts) {
			t.Errorf("prompts %q", prompts)
		}
		if strings.Contains(stderr.String(), "typed") {
			t.Errorf("stderr shows a password: %q", stderr.String())
		}
	}
}

// ansible.cfg's ask_pass and become_ask_pass ask as -k and -K do.
func TestAnsibleCfgAsksPasswords(t *testing.T) {
	work := t.TempDir()
	cfg := filepath.Join(work, "ansible.cfg")
	writeFile(t, cfg, "[defaults]\nask_pass = True\n[privilege_escalation]\nbecome_ask_pass = True\n")
	t.Setenv("ANSIBLE_CONFIG", cfg)
	a := newApp()
	var prompts []string
	a.ReadPassword = func(p string) (string, error) { prompts = append(prompts, p); return "typed", nil }
	a.Stderr = &bytes.Buffer{}
	o, err := a.parse("check", []string{"-i", "db1,"}, 1, targetFlags)
	if err != nil {
		t.Fatal(err)
	}
	inv, err := a.openInventory(o, "")
	if err != nil {
		t.Fatal(err)
	}
	if h := inv.Hosts[0]; len(prompts) != 2 || h.Conn.Password != "typed" || h.Conn.BecomePassword != "typed" {
		t.Fatalf("prompts %q, conn %q/%q", prompts, h.Conn.Password, h.Conn.BecomePassword)
	}
}
