package transport

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/internal/syspaths"
)

// userAndSystemConfigs writes ~/.ssh/config (and files it includes) under
// a temporary home and a system ssh_config, and points pgtune at them.
func userAndSystemConfigs(t *testing.T, files map[string]string) localIdentity {
	t.Helper()
	home := t.TempDir()
	for name, content := range files {
		p := filepath.Join(home, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	old := syspaths.SSHConfig
	syspaths.SSHConfig = filepath.Join(home, "etc-ssh", "ssh_config")
	t.Cleanup(func() { syspaths.SSHConfig = old })
	return localIdentity{user: "local", home: home}
}

// The user's file is read before the system's and the first value
// obtained wins, across both files and across Host blocks; IdentityFile
// accumulates in that order; an Include'd file counts where it is
// included.
func TestDefaultSSHConfigPrecedence(t *testing.T) {
	local := userAndSystemConfigs(t, map[string]string{
		".ssh/config": `Include conf.d/*.conf
Host pg1
  Port 2201
Host *
  User fleet
  IdentityFile ~/.ssh/id_fleet
`,
		".ssh/conf.d/10-pg.conf": "Host pg1 pg2\n  ConnectTimeout 7\n  Port 2202\n",
		"etc-ssh/ssh_config": `Host pg1
  Port 2299
  User sysuser
  HostName 127.0.0.9
  IdentityFile /etc/ssh/id_sys
Host *
  StrictHostKeyChecking accept-new
`,
	})
	for _, tc := range []struct {
		alias   string
		host    string
		port    int
		user    string
		keys    []string
		policy  string
		timeout string
	}{
		// Port: the included file's block comes first in the user's file.
		{"pg1", "127.0.0.9", 2202, "fleet", []string{local.home + "/.ssh/id_fleet", "/etc/ssh/id_sys"}, HostKeyAcceptNew, "7s"},
		{"pg2", "pg2", 2202, "fleet", []string{local.home + "/.ssh/id_fleet"}, HostKeyAcceptNew, "7s"},
		{"pg3", "pg3", 22, "fleet", []string{local.home + "/.ssh/id_fleet"}, HostKeyAcceptNew, "10s"},
	} {
		t.Run(tc.alias, func(t *testing.T) {
			r, err := resolve(SSHConfig{Name: tc.alias}, local, false)
			if err != nil {
				t.Fatal(err)
			}
			e := r.target
			if e.host != tc.host || e.port != tc.port || e.user != tc.user || e.policy != tc.policy || r.timeout.String() != tc.timeout {
				t.Errorf("got %s:%d user %s policy %s timeout %s; want %s:%d user %s policy %s timeout %s",
					e.host, e.port, e.user, e.policy, r.timeout, tc.host, tc.port, tc.user, tc.policy, tc.timeout)
			}
			if !reflect.DeepEqual(e.keyFiles, tc.keys) {
				t.Errorf("keys %q, want %q", e.keyFiles, tc.keys)
			}
		})
	}
	t.Run("inventory values win over both files", func(t *testing.T) {
		r, err := resolve(SSHConfig{Name: "pg1", Port: 2400, User: "inv"}, local, false)
		if err != nil {
			t.Fatal(err)
		}
		if r.target.port != 2400 || r.target.user != "inv" || r.target.host != "127.0.0.9" {
			t.Errorf("got %s@%s:%d", r.target.user, r.target.host, r.target.port)
		}
	})
	t.Run("an explicit ssh_config_file replaces both", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "vagrant-ssh-config")
		os.WriteFile(p, []byte("Host pg1\n  Port 2300\n"), 0o600)
		r, err := resolve(SSHConfig{Name: "pg1", ConfigFile: p}, local, false)
		if err != nil {
			t.Fatal(err)
		}
		if r.target.port != 2300 || r.target.user != "local" || r.target.host != "pg1" || r.target.policy != HostKeyStrict {
			t.Errorf("got %s@%s:%d policy %s", r.target.user, r.target.host, r.target.port, r.target.policy)
		}
	})
}

// Match blocks in included files are evaluated where they are included,
// as ssh(1) does: pg1's HostName is set after the Include, so Match host
// pg1 tests the name and matches (ssh -G agrees).
func TestDefaultSSHConfigMatchInInclude(t *testing.T) {
	local := userAndSystemConfigs(t, map[string]string{
		".ssh/config":            "Include ~/.ssh/conf.d/*\nHost pg1\n  HostName 127.0.0.9\n",
		".ssh/conf.d/match.conf": "# db hosts\nMatch host pg1\n  Port 2201\nMatch host db*\n  Port 2202\n",
	})
	r, err := resolve(SSHConfig{Name: "pg1"}, local, false)
	if err != nil || r.target.port != 2201 || r.target.host != "127.0.0.9" {
		t.Fatalf("pg1: %v, %+v; want 127.0.0.9:2201", err, r)
	}
	r, err = resolve(SSHConfig{Name: "db7"}, local, false)
	if err != nil || r.target.port != 2202 {
		t.Fatalf("db7: %v, port %d; want 2202", err, r.target.port)
	}
	t.Run("Match exec in an included file runs", func(t *testing.T) {
		local := userAndSystemConfigs(t, map[string]string{
			".ssh/config":        "Include inc\n",
			".ssh/inc":           "Match exec \"true\"\n  Port 2\n",
			"etc-ssh/ssh_config": "Host *\n  Port 3\n",
		})
		if r, err := resolve(SSHConfig{Name: "db"}, local, false); err != nil || r.target.port != 2 {
			t.Fatalf("err = %v, %+v", err, r)
		}
	})
	t.Run("an unsupported criterion in an included file names it", func(t *testing.T) {
		local := userAndSystemConfigs(t, map[string]string{
			".ssh/config": "Include inc\n",
			".ssh/inc":    "\nMatch localnetwork 10.0.0.0/8\n  Port 2\n",
		})
		_, err := resolve(SSHConfig{Name: "db"}, local, false)
		if want := local.home + "/.ssh/inc line 2: Match localnetwork is not supported"; err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("err = %v, want %q", err, want)
		}
	})
	t.Run("the system file's relative Include is under its directory", func(t *testing.T) {
		local := userAndSystemConfigs(t, map[string]string{
			"etc-ssh/ssh_config":          "Include ssh_config.d/*.conf\n",
			"etc-ssh/ssh_config.d/a.conf": "Host db\n  Port 2555\n",
		})
		r, err := resolve(SSHConfig{Name: "db"}, local, false)
		if err != nil || r.target.port != 2555 {
			t.Fatalf("err = %v, port %d", err, r.target.port)
		}
	})
}

// The user's ssh_config and the files it includes can run commands as
// the operator (Match exec, ProxyCommand): like ssh(1), pgtune refuses
// them when someone else may write them. The named ssh_config_file and
// the system's file are not checked (nor does ssh check -F).
func TestPrivateSSHConfigPermissions(t *testing.T) {
	for _, tc := range []struct {
		name    string
		chmod   string // file under home whose mode is widened
		mode    os.FileMode
		wantErr bool
	}{
		{"user file 0600", "", 0, false},
		{"user file 0644", ".ssh/config", 0o644, false},
		{"user file group-writable", ".ssh/config", 0o664, true},
		{"user file world-writable", ".ssh/config", 0o606, true},
		{"included file group-writable", ".ssh/inc", 0o660, true},
		{"system file group-writable", "etc-ssh/ssh_config", 0o664, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			local := userAndSystemConfigs(t, map[string]string{
				".ssh/config":        "Include inc\n",
				".ssh/inc":           "Match exec \"true\"\n  Port 2\n",
				"etc-ssh/ssh_config": "Host *\n  Port 3\n",
			})
			if tc.chmod != "" {
				if err := os.Chmod(filepath.Join(local.home, tc.chmod), tc.mode); err != nil {
					t.Fatal(err)
				}
			}
			r, err := resolve(SSHConfig{Name: "db"}, local, false)
			if tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), "bad owner or permissions") || !strings.Contains(err.Error(), tc.chmod) {
					t.Fatalf("err = %v, want bad owner or permissions naming %s", err, tc.chmod)
				}
				return
			}
			if err != nil || r.target.port != 2 {
				t.Fatalf("err = %v, %+v; want port 2", err, r)
			}
		})
	}
	t.Run("named ssh_config_file is not checked", func(t *testing.T) {
		local := userAndSystemConfigs(t, nil)
		p := filepath.Join(t.TempDir(), "vagrant-ssh-config")
		if err := os.WriteFile(p, []byte("Host db\n  Port 4\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, 0o666); err != nil {
			t.Fatal(err)
		}
		if r, err := resolve(SSHConfig{Name: "db", ConfigFile: p}, local, false); err != nil || r.target.port != 4 {
			t.Fatalf("err = %v, %+v; want port 4", err, r)
		}
	})
}
