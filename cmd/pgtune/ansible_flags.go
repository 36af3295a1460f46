package main

import (
	"fmt"
	"strings"
)

// refusedAnsibleFlags are ansible-playbook flags users bring by habit that
// pgtune cannot honour, each with the reason.
var refusedAnsibleFlags = map[string]string{
	"ask-pass":        "pgtune does not log in with passwords: it authenticates with keys and the SSH agent (install a key with ssh-copy-id)",
	"k":               "pgtune does not log in with passwords: it authenticates with keys and the SSH agent (install a key with ssh-copy-id)",
	"ask-become-pass": "pgtune runs sudo -n and never types a password: the login user needs passwordless sudo, or log in as root",
	"K":               "pgtune runs sudo -n and never types a password: the login user needs passwordless sudo, or log in as root",
	"become-user":     "pgtune becomes root, which its kernel steps need; there is no other become user",
}

// refuseAnsibleFlags fails on the first refused flag, before the usual
// "flag provided but not defined".
func refuseAnsibleFlags(args []string) error {
	for _, a := range args {
		if a == "--" {
			return nil
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") {
			continue
		}
		if why, ok := refusedAnsibleFlags[name]; ok {
			return fmt.Errorf("unsupported flag %s: %s", a, why)
		}
	}
	return nil
}
