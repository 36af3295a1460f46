package oom

import (
	"fmt"
	"path"
	"regexp"
)

// unitPattern is a systemd service name as pgtune accepts one from a host
// (a cgroup path, Debian's version and cluster names): letters, digits
// and @._:- only, not starting with a dash, ending in .service.
var unitPattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9@._:-]{0,200}\.service$`)

// dropinPath is the drop-in for unit.
func dropinPath(unit string) string {
	return path.Join("/etc/systemd/system", unit+".d", dropinName)
}

// dropinContent is the whole drop-in. OOMScoreAdjust= shields the process
// systemd starts and everything it forks; the environment makes the
// postmaster's children reset themselves. Debian's pg_ctlcluster sets its
// own -900 as it starts the server, after systemd applied
// OOMScoreAdjust=, so ExecStartPost= puts the postmaster (the unit's main
// process, from its PID file) at the policy's value once it is up; the
// leading "-" keeps a failure there from failing the unit, and verify
// reads the value back.
func dropinContent(postmasterAdj int) []byte {
	return []byte(fmt.Sprintf(`# Managed by pgtune (oom); rewritten whole on every apply.
# Keep the OOM killer off the postmaster: its children (the backends) reset
# themselves to %[2]d at fork, so a runaway backend is what gets killed and the
# postmaster recovers from it. A backend's OOM kill must not stop the unit.
[Service]
OOMPolicy=%[3]s
OOMScoreAdjust=%[1]d
Environment=PG_OOM_ADJUST_FILE=%[4]s
Environment=PG_OOM_ADJUST_VALUE=%[2]d
ExecStartPost=-/bin/sh -c 'echo %[1]d > /proc/$$MAINPID/oom_score_adj'
`, postmasterAdj, backendScoreAdj, oomPolicy, adjustFile))
}
