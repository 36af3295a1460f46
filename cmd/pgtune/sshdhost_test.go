package main

import (
	"strconv"
	"strings"

	"github.com/pgtune/pgtune/internal/testhost"
)

// The same helper as e2e's (fault_helpers_test.go), for the tests here
// that reach this machine over sshd.

// sshdHost is an inventory host entry reaching this machine through sshd.
func sshdHost(name string, s *testhost.SSHServer, extra ...string) string {
	lines := []string{
		"        " + name + ":",
		"          ssh_host: 127.0.0.1",
		"          ssh_port: " + strconv.Itoa(s.Port),
		"          ssh_user: root",
		"          ssh_private_key_file: " + s.KeyFile,
		"          ssh_known_hosts_file: " + s.KnownHostsFile,
	}
	for _, e := range extra {
		lines = append(lines, "          "+e)
	}
	return strings.Join(lines, "\n") + "\n"
}
