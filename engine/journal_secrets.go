package engine

import (
	"path"
	"regexp"
	"strings"
)

// Journals written before JournalEntry.Sensitive existed hold Patroni
// configurations unmarked, and a journal is host input anyway. So the
// undo of a file entry is treated as sensitive whenever the file is one
// that holds secrets, whatever its entry says: rollback never shows such
// a file's content, and its write back is journaled sensitive.

// secretFileNames are the base names of files that hold passwords.
var secretFileNames = map[string]bool{".pgpass": true, "pgpass": true, "pg_hba.conf": true, "pgpass.conf": true}

// patroniSection matches a line that opens one of the two sections every
// Patroni configuration has, at the top level of a YAML document: no
// other file pgtune manages has such a line.
var patroniSection = regexp.MustCompile(`(?m)^(restapi|postgresql)[ \t]*:([ \t]|$)`)

// fileHoldsSecrets reports whether the file p, with the given contents
// (before and after a change, any may be nil), holds secrets: it is the
// host's Patroni configuration, has a YAML or a password file's name, or
// reads like a Patroni configuration.
func fileHoldsSecrets(t *Target, p string, contents ...[]byte) bool {
	if t != nil && t.Facts != nil && t.Facts.Topology != nil && t.Facts.Topology.Patroni != nil {
		if cf := t.Facts.Topology.Patroni.ConfigFile; cf != "" && path.Clean(cf) == path.Clean(p) {
			return true
		}
	}
	base := path.Base(p)
	if secretFileNames[base] || strings.HasSuffix(base, ".yml") || strings.HasSuffix(base, ".yaml") {
		return true
	}
	for _, c := range contents {
		if patroniSection.Match(c) {
			return true
		}
	}
	return false
}
