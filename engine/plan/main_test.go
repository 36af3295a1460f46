package plan

import (
	"os"
	"testing"

	"github.com/pgtune/pgtune/internal/testenv"
)

// TestMain runs the tests away from this machine's ssh and Ansible
// configuration, agent and run state (testenv).
func TestMain(m *testing.M) { os.Exit(testenv.Run(m)) }
