package transport

import "testing"

// TestResolveCommandLineProxy: SSHConfig.ProxyCommand and ProxyJump (from
// the inventory's ssh args) win over the ssh_config's, as options given
// to ssh(1) on its command line do.
func TestResolveCommandLineProxy(t *testing.T) {
	conf := writeTemp(t, "ssh_config", "Host viajump\n  ProxyJump bastion\nHost viacmd\n  ProxyCommand nc %h %p\n")
	local := localIdentity{user: "u", home: t.TempDir()}
	for _, tc := range []struct {
		name      string
		cfg       SSHConfig
		wantCmd   string
		wantJumps int
	}{
		{"command wins over the file's jump", SSHConfig{Name: "viajump", ConfigFile: conf, ProxyCommand: "ssh -W %h:%p gw"}, "ssh -W viajump:22 gw", 0},
		{"jump wins over the file's command", SSHConfig{Name: "viacmd", ConfigFile: conf, ProxyJump: "gw:2222"}, "", 1},
		{"the file's own jump", SSHConfig{Name: "viajump", ConfigFile: conf}, "", 1},
		{"the file's own command", SSHConfig{Name: "viacmd", ConfigFile: conf}, "nc viacmd 22", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := resolve(tc.cfg, local, false)
			if err != nil {
				t.Fatal(err)
			}
			if r.target.proxyCommand != tc.wantCmd || len(r.jumps) != tc.wantJumps {
				t.Errorf("proxy command %q, %d jumps; want %q, %d", r.target.proxyCommand, len(r.jumps), tc.wantCmd, tc.wantJumps)
			}
		})
	}
}
