package main

import (
	"bytes"
	"context"
	"errors"
	"strings"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/inventory"
	"github.com/pgtune/pgtune/engine/transport"
)

// runBare runs the CLI in-process with module m and no host reachable:
// for the commands that must stop before contacting any (refusals). The
// run state is wherever XDG_STATE_HOME points (fleetApp sets it).
func runBare(m engine.Module, args ...string) (int, string) {
	var stdout, stderr bytes.Buffer
	app := newApp()
	app.Modules = []engine.Module{m}
	app.Stdin = strings.NewReader("")
	app.Stdout, app.Stderr = &stdout, &stderr
	app.IsTerminal = func() bool { return false }
	app.Dial = func(context.Context, *inventory.Host) (transport.Transport, error) {
		return nil, errors.New("runBare: no host is reachable")
	}
	code := app.Run(args)
	return code, stderr.String()
}
