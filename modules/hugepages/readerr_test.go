package hugepages

import (
	"context"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine/transport"
	"github.com/pgtune/pgtune/modules/internal/fakehost"
)

// TestReadErrorNamesFileOnce: a file the check cannot read is named once
// in the error ("read FILE: …"): the engine's read already says which,
// and the module's own step does not say it again. Covers the sysctl
// file and a conflicting file (sysctlconf), the tmpfiles file of the
// default size (release) and of another size (boot file).
func TestReadErrorNamesFileOnce(t *testing.T) {
	tests := []struct {
		name   string
		file   string // the read that fails
		host   func(h *fakehost.Host)
		params func(t *testing.T, p *Params)
	}{
		{name: "sysctl file", file: "/etc/sysctl.d/10-hugepages.conf"},
		{name: "conflicting file", file: "/etc/sysctl.conf",
			host: func(h *fakehost.Host) {
				h.Files["/etc/sysctl.conf"] = "vm.nr_hugepages = 100\n"
			},
			params: func(t *testing.T, p *Params) { p.OnConflict = val(t, "comment") }},
		{name: "tmpfiles file, default size", file: tmpfiles},
		{name: "tmpfiles file, 1 GiB pages", file: tmpfiles, host: withGig,
			params: func(t *testing.T, p *Params) { p.PageSize = val(t, "1GiB") }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := fakehost.New()
			if tc.host != nil {
				tc.host(h)
			}
			prm := DefaultParams()
			if tc.params != nil {
				tc.params(t, prm)
			}
			h.Fail = func(op transport.Op, args []string) string {
				if op == transport.OpReadFile && len(args) > 0 && args[0] == tc.file {
					return "cat: " + tc.file + ": Permission denied"
				}
				return ""
			}
			_, err := New().Check(context.Background(), h.Target("fake"), prm)
			if err == nil {
				t.Fatalf("check passed; want the read of %s to fail it", tc.file)
			}
			if n := strings.Count(err.Error(), "read "+tc.file); n != 1 {
				t.Errorf("error names \"read %s\" %d times, want once:\n%v", tc.file, n, err)
			}
		})
	}
}
