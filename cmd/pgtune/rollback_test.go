package main

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/pgtune/pgtune/engine/inventory"
	"github.com/pgtune/pgtune/engine/transport"
)

// TestRollbackTakesInventoryAsEveryCommand: without -i, rollback goes to
// the hosts of ansible.cfg's inventory, with its connection defaults, as
// apply does (it went to localhost: apply to the fleet, rollback here).
func TestRollbackTakesInventoryAsEveryCommand(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv("ANSIBLE_CONFIG", "")
	os.Unsetenv("ANSIBLE_CONFIG")
	writeFile(t, filepath.Join(dir, "ansible.cfg"), "[defaults]\ninventory = fleet.ini\nremote_user = dba\n")
	writeFile(t, filepath.Join(dir, "fleet.ini"), "db1 ansible_host=10.0.0.1\ndb2 ansible_host=10.0.0.2\n")
	app, _, stderr := testApp(nil)
	var mu sync.Mutex
	reached := map[string]string{}
	app.Dial = func(_ context.Context, h *inventory.Host) (transport.Transport, error) {
		mu.Lock()
		defer mu.Unlock()
		reached[h.Name] = h.Conn.User
		return nil, os.ErrDeadlineExceeded // unreachable: nothing is done
	}
	code := app.Run([]string{"rollback", "--yes"})
	if code != 1 || len(reached) != 2 || reached["db1"] != "dba" || reached["db2"] != "dba" {
		t.Errorf("rollback: exit %d, reached %v; want db1 and db2 as dba\n%s", code, reached, stderr.String())
	}
}
