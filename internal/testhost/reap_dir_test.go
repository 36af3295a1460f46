package testhost

import (
	"os"
	"testing"
)

func TestTmpDir(t *testing.T) {
	for _, c := range []struct {
		path string
		want bool
	}{
		{"/tmp/pgtune-pg-123", true},
		{"/var/tmp/pgtune-sshd-1", true},
		{"/tmp/pgtune-test-tmp-9/pgtune-sshd-1", true},
		{"/tmp/pgtune-test-tmp-9/x/pgtune-sshd-1", false},
		{"/tmp/other", false},
		{"/tmp", false},
		{"/etc/pgtune-x", false},
		{"/", false},
		{"pgtune-pg-1", false},
		{"/home/pgtune-test-tmp-1/pgtune-pg-1", false},
	} {
		if got := tmpDir(c.path); got != c.want {
			t.Errorf("tmpDir(%q) = %v, want %v", c.path, got, c.want)
		}
	}
	if os.TempDir() == "/tmp" && tmpDir("/tmp/go-test-script1") {
		t.Error("a directory not named pgtune-* is testhost's")
	}
}
