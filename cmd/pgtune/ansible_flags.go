package main

import (
	"fmt"
	"strings"
)

// refusedAnsibleFlags are ansible-playbook flags users bring by habit that
// pgtune cannot honour, each with the reason.
var refusedAnsibleFlags = map[string]string{
	"become-user":   "pgtune becomes root, which its kernel steps need; there is no other become user",
	"become-method": "pgtune becomes root with sudo only",
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
