package facts

import (
	"os"
	"testing"

	"github.com/pgtune/pgtune/internal/testenv"
	"github.com/pgtune/pgtune/internal/testhost"
)

// TestMain lets copies of this test binary act as a WAL receiver
// (walRecvChild) or as fake PostgreSQL
// programs (testhost.FakeBinDir) for the tests that need a binary pgtune
// must not run, or must run only as the cluster owner. The tests run away
// from this machine's ssh and Ansible configuration, agent and run state
// (testenv).
func TestMain(m *testing.M) {
	walRecvChild()
	testhost.FakeMain()
	os.Exit(testenv.Run(m))
}
