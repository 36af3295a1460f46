package testenv

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestSysctlConfigMasked: as root, this binary runs with every existing
// sysctl configuration path empty, and the masks are this binary's alone
// (the machine's namespace, the one go test started this binary in, has
// none of them).
func TestSysctlConfigMasked(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("masking the sysctl configuration needs root (a mount namespace)")
	}
	paths, err := sysctlPaths()
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Skip("this machine has no sysctl configuration to mask")
	}
	masked, err := sysctlMasked()
	if err != nil || !masked {
		t.Fatalf("not masked (%v): the tests see this machine's sysctl configuration", err)
	}
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.IsDir() {
			entries, err := os.ReadDir(p)
			if err != nil || len(entries) != 0 {
				t.Errorf("%s: %d entries, %v", p, len(entries), err)
			}
		} else if fi.Size() != 0 {
			t.Errorf("%s: %d bytes", p, fi.Size())
		}
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(os.Getppid()) + "/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), " "+MaskSource+" ") {
		t.Errorf("a mask reached the machine's mount namespace:\n%s", b)
	}
	if t.Failed() {
		return // never write into the machine's directory
	}
	// Writable, as the tests' own drop-ins need.
	for _, p := range paths {
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			f := filepath.Join(p, "zz-pgtune-testenv.conf")
			if err := os.WriteFile(f, []byte("vm.overcommit_ratio = 50\n"), 0o644); err != nil {
				t.Errorf("write in %s: %v", p, err)
			}
			_ = os.Remove(f)
			break
		}
	}
}
