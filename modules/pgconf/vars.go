package pgconf

import (
	"fmt"

	"github.com/pgtune/pgtune/engine"
)

// restartVar is the inventory var naming the command that restarts the
// cluster instead of pg_ctl (pgconf's own knob: the engine does not know
// it). The inventory checked its text when it was loaded.
const restartVar = "pg_restart"

// restartCommand is the host's pg_restart command, "" when not set.
func restartCommand(t *engine.Target) string {
	switch v := t.Vars[restartVar].(type) {
	case nil:
		return ""
	case string:
		return v
	default:
		return fmt.Sprint(v)
	}
}
