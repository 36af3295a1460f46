package inventory

import (
	"fmt"
	"sort"
	"strings"
	"sync"
)

// pgtuneVars are the inventory vars pgtune reads besides the connection
// keys (connKeys).
var pgtuneVars = []string{"pgtune_sensitive", "pgtune_state_dir", "pgtune_replication_host", "pgtune_restart_partial_cluster"}

// typoOf returns the pgtune key that k looks like a misspelling of, or
// "" when k is a key of pgtune's or looks like none. A var of pgtune's
// prefix that pgtune does not know is one whatever it looks like.
// Inventories carry many vars of other tools, so only near misses count:
// a mistyped pgtune_sensitive leaves its secrets unmasked, a mistyped
// pg_data audits another cluster, both silently.
func typoOf(k string) (near string, ok bool) {
	if isConnKey(k) || strings.HasPrefix(k, "ansible_") {
		return "", false
	}
	best, dist := "", 3
	for _, known := range ownKeys() {
		if known == k {
			return "", false
		}
		if d := editDistance(k, known); d < dist {
			best, dist = known, d
		}
	}
	limit := 2
	if len(k) < 8 {
		limit = 1
	}
	if best != "" && dist <= limit {
		return best, true
	}
	return "", strings.HasPrefix(k, "pgtune_")
}

// ownKeys are pgtune's own var names (not Ansible's spellings), listed
// once: typoOf runs for every var of an inventory.
var ownKeys = sync.OnceValue(func() []string {
	var out []string
	for _, k := range connOrder {
		if !strings.HasPrefix(k, "ansible_") {
			out = append(out, k)
		}
	}
	return append(out, pgtuneVars...)
})

// editDistance is the Damerau–Levenshtein distance (adjacent
// transpositions count one) between two short ASCII names.
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// typoWarnings says, once per place it is written, each var that looks
// like a mistyped pgtune key.
func typoWarnings(defs []varDef) []string {
	type place struct {
		file, key string
		line      int
	}
	seen := map[place]bool{}
	var out []string
	for _, d := range defs {
		p := place{d.file, d.key, d.line}
		if seen[p] {
			continue // a group's var, met again with each host
		}
		seen[p] = true
		near, ok := typoOf(d.key)
		if !ok {
			continue
		}
		where := fmt.Sprintf("%s:%d", d.file, d.line)
		msg := fmt.Sprintf("inventory: %s: %s is not a pgtune key", where, d.key)
		if near != "" {
			msg += fmt.Sprintf(" (did you mean %s?)", near)
		} else {
			msg += fmt.Sprintf(" (pgtune's own: %s)", strings.Join(pgtuneVars, ", "))
		}
		out = append(out, msg+": it is kept as a plain var and does nothing")
	}
	sort.Strings(out)
	return out
}
