package transport

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The developer's agent and keys must not decide a test's outcome.
	os.Unsetenv("SSH_AUTH_SOCK")
	if home, err := os.MkdirTemp("", "pgtune-transport-home-"); err == nil {
		os.Setenv("HOME", home)
		defer os.RemoveAll(home)
	}
	goleak.VerifyTestMain(m)
}
