package engine

import "github.com/pgtune/pgtune/engine/inventory"

// hostSecrets is every secret of a host masked in its output: its
// sensitive vars (see secretsOf) and its login and become passwords,
// which may come from --ask-pass / --ask-become-pass rather than vars.
func hostSecrets(h *inventory.Host) []string {
	out := secretsOf(h.Vars)
	for _, pw := range []string{h.Conn.Password, h.Conn.BecomePassword} {
		if pw != "" {
			out = append(out, pw)
		}
	}
	return out
}
