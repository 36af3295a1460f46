package mask

import (
	"strings"
	"testing"
	"unsafe"
)

// TestNothingToMaskIsNotCopied: a fleet's report holds every host's
// configuration files; content with nothing to mask must come back as the
// same string, not a copy of it (the controller's memory per host).
func TestNothingToMaskIsNotCopied(t *testing.T) {
	conf := strings.Repeat("#shared_buffers = 128MB\t# min 128kB\nmax_connections = 100\n\n", 200)
	diff := "--- a/x.conf\n+++ b/x.conf\n@@ -1,2 +1,2 @@\n max_connections = 100\n-shared_buffers = 1GB\n+shared_buffers = 2GB\n"
	tests := []struct {
		name string
		fn   func(string) string
		in   string
	}{
		{"Config", Config, conf},
		{"Text", Text, conf},
		{"Diff", Diff, diff},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := tc.fn(tc.in)
			if out != tc.in {
				t.Fatalf("%s changed content with nothing to mask:\n%q", tc.name, out)
			}
			if unsafe.StringData(out) != unsafe.StringData(tc.in) {
				t.Errorf("%s returned a copy of content it left as it was", tc.name)
			}
		})
	}
	// Masking still happens, and only on the lines that need it.
	in := conf + "primary_conninfo = 'host=db1 password=s3cr3t'\n"
	if out := Config(in); !strings.Contains(out, "password=(sensitive)") || !strings.HasPrefix(out, conf) {
		t.Errorf("Config did not mask the conninfo line only:\n%q", out[len(out)-80:])
	}
}

func TestUnquoteConf(t *testing.T) {
	tests := []struct{ in, want string }{
		{"'abc'", "abc"},
		{"'abc' # comment", "abc"},
		{"'a''b'", "a'b"},
		{"'a'''", "a'"},
		{"'a''", "a'"},
		{`'a\'b'`, `a\'b`},
		{`'\'`, `\'`},
		{"'abc", "abc"},
		{"'", ""},
		{"''", ""},
	}
	for _, tc := range tests {
		if got := unquoteConf(tc.in); got != tc.want {
			t.Errorf("unquoteConf(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
