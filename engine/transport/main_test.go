package transport

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/pgtune/pgtune/internal/testenv"
	"github.com/pgtune/pgtune/internal/testhost"
)

func TestMain(m *testing.M) {
	// The test binary doubles as the ProxyCommand of the proxy tests.
	if len(os.Args) > 1 && os.Args[1] == proxyHelperArg {
		os.Exit(runProxyHelper(os.Args[2:]))
	}
	// And as a local-connection controller run by another user.
	if len(os.Args) > 1 && os.Args[1] == localBecomeHelperArg {
		os.Exit(runLocalBecomeHelper())
	}
	// The developer's agent, keys, ssh_config files and the machine's
	// /etc/ssh/ssh_config must not decide a test's outcome (tests that
	// need a file set it).
	done, err := testenv.Isolate()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		os.Exit(1)
	}
	code := m.Run()
	// As goleak.VerifyTestMain, but the temporary HOME is removed before
	// exiting (os.Exit skips deferred calls).
	if code == 0 {
		if err := goleak.Find(testhost.LeakOptions()...); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on successful test run: %v\n", err)
			code = 1
		}
	}
	done()
	os.Exit(code)
}
