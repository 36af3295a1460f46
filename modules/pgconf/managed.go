package pgconf

import (
	"path"
	"strings"

	"github.com/pgtune/pgtune/engine"
)

var _ engine.TargetManager = (*Module)(nil)

// Manages says which files rollback may put back for this module: those of
// the host's cluster only — its postgresql.conf, postgresql.auto.conf, and
// *.conf files (the drop-in, included files) under the configuration or
// the data directory — and which replication slots it may drop: those a
// switchover made on the host's server. Without a cluster found on the
// host, none.
func (*Module) Manages(t *engine.Target, kind, target string) bool {
	if t.Facts == nil || t.Facts.Postgres == nil {
		return false
	}
	if kind == "created" {
		// A replication slot a switchover made on this server
		// (slot_journal.go), its name one PostgreSQL allows.
		port, _, ok := parseSlotKey(target)
		return ok && port == t.Facts.Postgres.Port
	}
	if kind != "file" {
		return false
	}
	if topo := t.Facts.Topology; topo != nil && topo.Patroni != nil && topo.Patroni.ConfigFile != "" &&
		target == path.Clean(topo.Patroni.ConfigFile) {
		return true // a Patroni member's settings (patroni.go)
	}
	config, data := path.Clean(t.Facts.Postgres.ConfigFile), path.Clean(t.Facts.Postgres.DataDir)
	switch {
	case target == config, target == path.Join(data, autoConfName):
		return true
	case !strings.HasSuffix(target, ".conf"):
		return false
	}
	return within(path.Dir(config), target) || within(data, target)
}

// within reports whether p lies below dir (both clean and absolute).
func within(dir, p string) bool {
	return dir != "" && dir != "/" && strings.HasPrefix(p, dir+"/")
}
