package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	a := newApp()
	a.Stdout, a.Stderr = &out, &errOut
	code = a.Run(args)
	return out.String(), errOut.String(), code
}

// TestInventoryList shows resolved hosts with their connection and vars,
// secrets masked, in both formats (golden files).
func TestInventoryList(t *testing.T) {
	for _, tc := range []struct {
		golden string
		args   []string
	}{
		{"inventory-list.golden", []string{"inventory", "list", "-i", "testdata/inventory/hosts"}},
		{"inventory-host.json.golden", []string{"inventory", "list", "-i", "testdata/inventory/hosts", "--host", "db1", "--format", "json"}},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			out, errOut, code := runCLI(t, tc.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			assertInert(t, "inventory list", out+errOut)
			// ansible_password is used (and masked), so nothing warns.
			if errOut != "" {
				t.Errorf("stderr: want nothing, got:\n%s", errOut)
			}
			checkGolden(t, tc.golden, out)
		})
	}
}

func TestInventoryListErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"inventory", "list", "-i", "testdata/inventory/hosts", "--host", "db9"}, "pgtune: inventory: no host \"db9\"\n"},
		{[]string{"inventory", "show"}, "Usage:\n  pgtune inventory list"},
		{[]string{"check", "-i", "db1,", "--ask-pass"}, "pgtune: --ask-pass: needs a terminal to read the password from"},
		{[]string{"apply", "-K", "-i", "db1,"}, "pgtune: --ask-become-pass: needs a terminal to read the password from"},
		{[]string{"check", "--become-user=postgres"}, "pgtune: unsupported flag --become-user=postgres: pgtune becomes root"},
		{[]string{"inventory", "list", "-i", "db1,db2,", "--host", "db2"}, ""},
	} {
		_, errOut, code := runCLI(t, tc.args...)
		if tc.want == "" {
			if code != 0 {
				t.Errorf("%v: exit %d: %s", tc.args, code, errOut)
			}
			continue
		}
		if code != 1 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q in it", tc.args, code, errOut, tc.want)
		}
	}
}

// TestAnsibleCfg: ansible.cfg (here via $ANSIBLE_CONFIG) gives the
// inventory, forks and connection defaults; -i and --forks win over it.
func TestAnsibleCfg(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("ansible.cfg", "[defaults]\ninventory = hosts\nforks = 7\nremote_user = deploy\n")
	write("hosts", "[db]\ndb1\ndb2 ansible_user=admin\n")
	t.Setenv("ANSIBLE_CONFIG", filepath.Join(dir, "ansible.cfg"))

	out, errOut, code := runCLI(t, "inventory", "list", "--format", "json")
	if code != 0 || !strings.Contains(out, `"user": "deploy"`) || !strings.Contains(out, `"user": "admin"`) {
		t.Errorf("exit %d\n%s%s", code, out, errOut)
	}
	out, _, code = runCLI(t, "inventory", "list", "-i", "other1,", "--format", "json")
	if code != 0 || !strings.Contains(out, `"name": "other1"`) || strings.Contains(out, "db1") {
		t.Errorf("-i does not win over ansible.cfg:\n%s", out)
	}
	for _, tc := range []struct {
		args  []string
		forks int
	}{{nil, 7}, {[]string{"--forks", "3"}, 3}, {[]string{"-f", "20"}, 20}} {
		a := newApp()
		a.Stderr = &bytes.Buffer{}
		o, err := a.parse("check", tc.args, 1, targetFlags)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.openInventory(o, ""); err != nil {
			t.Fatal(err)
		}
		if o.forks != tc.forks {
			t.Errorf("%v: forks %d, want %d", tc.args, o.forks, tc.forks)
		}
	}
}
