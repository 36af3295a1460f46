package main

import "path/filepath"

// playbookDir is where the playbook's group_vars/ and host_vars/ are; ""
// for the built-in policy.
func playbookDir(playbook string) string {
	if playbook == "" {
		return ""
	}
	return filepath.Dir(playbook)
}
