package transport

import "testing"

// The %-tokens of paths (IdentityFile, known_hosts files) and of
// ProxyCommand: paths keep what they do not know, ProxyCommand refuses it.
func TestExpandTokens(t *testing.T) {
	e := &endpoint{host: "db1.example", port: 2222, user: "admin"}
	for _, tc := range []struct{ in, want string }{
		{"~/.ssh/id_%h_%p", "/home/op/.ssh/id_db1.example_2222"},
		{"/k/%r@%h:%p %u %d %%", "/k/admin@db1.example:2222 op /home/op %"},
		{"/k/%n %C %", "/k/%n %C %"},
		{"/plain", "/plain"},
	} {
		if got := expandPath(tc.in, e, "op", "/home/op"); got != tc.want {
			t.Errorf("expandPath(%q) = %q; want %q", tc.in, got, tc.want)
		}
	}
	for _, tc := range []struct{ in, want, wantErr string }{
		{"nc %h %p # %r %n %%", "nc db1.example 2222 # admin db1 %", ""},
		{"ssh -W %h:%p jump", "ssh -W db1.example:2222 jump", ""},
		{"nc %h %u", "", `ProxyCommand "nc %h %u": token %u is not supported (use %h %p %r %n %%)`},
		{"nc %h %", "", `ProxyCommand "nc %h %": lone % at the end`},
	} {
		got, err := expandProxyCommand(tc.in, e, "db1")
		if tc.wantErr != "" {
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("expandProxyCommand(%q): err %v; want %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("expandProxyCommand(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}
