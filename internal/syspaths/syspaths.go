// Package syspaths names the machine-wide files pgtune reads on the
// controller without an inventory or a flag naming them: the system's
// ssh_config and Ansible's last-resort ansible.cfg.
//
// They are variables for pgtune's own tests only, whose expectations must
// not depend on the machine that runs them (internal/testenv sets both to
// "", read as "none"). Being internal, nothing outside this module can set
// them, and the binary has no flag or environment variable for them: the
// tests that run a built binary link it with
//
//	-ldflags '-X github.com/pgtune/pgtune/internal/syspaths.SSHConfig= -X github.com/pgtune/pgtune/internal/syspaths.AnsibleConfig='
//
// (testenv.LDFlags), which no user build does.
package syspaths

// SSHConfig is the system-wide ssh_config, read after the user's
// ~/.ssh/config when a host names no ssh_config_file ("": none).
var SSHConfig = "/etc/ssh/ssh_config"

// AnsibleConfig is the ansible.cfg read when $ANSIBLE_CONFIG,
// ./ansible.cfg and ~/.ansible.cfg all are missing ("": none).
var AnsibleConfig = "/etc/ansible/ansible.cfg"
