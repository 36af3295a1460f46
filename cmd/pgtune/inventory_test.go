package main

import (
	"bytes"
	"encoding/json"
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

// TestInventoryListRoute: where an ssh_config sends a host elsewhere
// than its inventory fields say (a bastion, another HostName, port or
// user), inventory list shows the route pgtune really takes, resolved as
// -vvv resolves it: a proxy command named, never shown; no Match exec run;
// a route the ssh_config makes fail said. Hosts it leaves alone list as
// before (TestInventoryList's golden files are unchanged).
func TestInventoryListRoute(t *testing.T) {
	marker := filepath.Join("testdata", "inventory-route", "match-exec-ran")
	t.Cleanup(func() { os.Remove(marker) })
	t.Setenv("USER", "alice") // a host without a user anywhere logs in as this
	for _, tc := range []struct {
		golden string
		args   []string
	}{
		{"inventory-route.golden", []string{"inventory", "list", "-i", "testdata/inventory-route/hosts"}},
		{"inventory-route.json.golden", []string{"inventory", "list", "-i", "testdata/inventory-route/hosts", "--host", "db1", "--format", "json"}},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			out, errOut, code := runCLI(t, tc.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			assertInert(t, "inventory list", out+errOut)
			if strings.Contains(out+errOut, "Hunter2pw") {
				t.Errorf("the proxy command's password is shown:\n%s", out)
			}
			checkGolden(t, tc.golden, out)
		})
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("inventory list ran a Match exec command")
	}

	// The user's ~/.ssh/config counts too, when no ssh_config_file is set.
	home := t.TempDir()
	t.Setenv("HOME", home)
	if err := os.Mkdir(filepath.Join(home, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".ssh", "config"), []byte("Host pg1\n  HostName 10.1.0.1\n  Port 2201\n  ProxyJump ops@bastion.example.com\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runCLI(t, "inventory", "list", "-i", "pg1,pg2,", "--format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got struct {
		Hosts []struct {
			Name       string
			Connection map[string]any
		}
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	routes := map[string]any{}
	for _, h := range got.Hosts {
		if r, ok := h.Connection["route"]; ok {
			routes[h.Name] = r
		}
	}
	if r, _ := routes["pg1"].(string); !strings.Contains(r, "@10.1.0.1 port 2201") || !strings.Contains(r, "jump host ops@bastion.example.com port 22") {
		t.Errorf("pg1 route %q: want ~/.ssh/config's HostName, Port and ProxyJump", r)
	}
	if r, ok := routes["pg2"]; ok {
		t.Errorf("pg2 has no ssh_config entry but a route %q", r)
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
