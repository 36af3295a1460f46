package facts

import (
	"os"
	"testing"

	"github.com/pgtune/pgtune/internal/testhost"
)

// TestMain lets copies of this test binary act as fake PostgreSQL
// programs (testhost.FakeBinDir) for the tests that need a binary pgtune
// must not run, or must run only as the cluster owner.
func TestMain(m *testing.M) {
	testhost.FakeMain()
	os.Exit(m.Run())
}
