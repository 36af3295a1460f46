package inventory

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// vaultValue stands for a `!vault` value: pgtune cannot decrypt it.
type vaultValue struct{}

func (vaultValue) String() string { return "(vault-encrypted)" }

// ansibleExtraKeys are the Ansible connection vars resolved after the
// connection keys, because they refine what those set.
var ansibleExtraKeys = map[string]bool{
	"ansible_ssh_common_args": true,
	"ansible_ssh_extra_args":  true,
	"ansible_become_user":     true,
	"ansible_become_method":   true,
}

// ignoredAnsibleVars are ansible_* vars that do not change how pgtune
// reaches a host or what it does there, so they are ignored silently.
var ignoredAnsibleVars = map[string]bool{
	"ansible_group_priority":     true,
	"ansible_python_interpreter": true,
}

func isConnKey(k string) bool {
	_, ok := connKeys[k]
	return ok || ansibleExtraKeys[k]
}

func knownAnsibleVar(k string) bool { return isConnKey(k) || ignoredAnsibleVars[k] }

// unusable says why pgtune cannot use a value as written: a Jinja
// template or an Ansible Vault value. nil when it can.
func unusable(d varDef) error {
	if s, ok := findUnusable(d.value); ok {
		if s == "" {
			return d.errAt("%s is encrypted with Ansible Vault, which pgtune does not decrypt: give pgtune the plain value "+
				"(ansible-vault view shows it) in a vars file only you can read, e.g. host_vars/HOST.yml with mode 0600, "+
				"and name it in pgtune_sensitive so that it is masked", d.key)
		}
		return d.errAt("%s: %s is a Jinja template, which pgtune does not evaluate (pgtune expressions are ${ }); write the value itself", d.key, strconv.Quote(s))
	}
	return nil
}

// findUnusable looks for a Jinja template (returned) or a vault value
// ("" returned) anywhere in v.
func findUnusable(v any) (string, bool) {
	switch t := v.(type) {
	case vaultValue:
		return "", true
	case string:
		if strings.HasPrefix(t, "$ANSIBLE_VAULT;") {
			return "", true
		}
		if strings.Contains(t, "{{") || strings.Contains(t, "{%") {
			return t, true
		}
	case []any:
		for _, e := range t {
			if s, ok := findUnusable(e); ok {
				return s, true
			}
		}
	case map[string]any:
		for _, e := range t {
			if s, ok := findUnusable(e); ok {
				return s, true
			}
		}
	}
	return "", false
}

// unknownVarsWarning turns the ansible_* vars pgtune ignores into one
// warning said once per run, each var with a few of its hosts.
func unknownVarsWarning(unknown map[string][]string) []string {
	var parts []string
	for _, k := range sortedKeys(unknown) {
		hosts := unknown[k]
		sort.Strings(hosts)
		shown := strings.Join(hosts[:min(3, len(hosts))], ", ")
		if len(hosts) > 3 {
			shown += fmt.Sprintf(" and %d more", len(hosts)-3)
		}
		parts = append(parts, fmt.Sprintf("%s (%s)", k, shown))
	}
	if len(parts) == 0 {
		return nil
	}
	return []string{"inventory: pgtune ignores these Ansible variables: " + strings.Join(parts, "; ")}
}

// applyAnsibleExtras applies ansible_become_user, ansible_become_method
// and the ssh options of ansible_ssh_common_args and ansible_ssh_extra_args
// to c. As with ssh(1), the first value given for an option wins, and
// pgtune's own keys (ansible_port, ansible_user, …) come before both.
func applyAnsibleExtras(host string, c *Conn, extra map[string]varDef) error {
	if d, ok := extra["ansible_become_user"]; ok {
		if u := fmt.Sprint(d.value); u != "root" && u != "" {
			return d.errAt("host %q: ansible_become_user %s is not supported: pgtune becomes root, which its kernel steps need; remove it or set it to root", host, strconv.Quote(u))
		}
	}
	if d, ok := extra["ansible_become_method"]; ok {
		if m := fmt.Sprint(d.value); m != "sudo" {
			return d.errAt("host %q: ansible_become_method %s is not supported: pgtune becomes root with sudo only", host, strconv.Quote(m))
		}
	}
	set := map[string]bool{}
	for _, key := range []string{"ansible.cfg ssh_args", "ansible_ssh_common_args", "ansible_ssh_extra_args"} {
		d, ok := extra[key]
		if !ok {
			continue
		}
		s, ok := d.value.(string)
		if !ok {
			return d.errAt("host %q: %s: expected a string of ssh options, got %s", host, key, show(d.value))
		}
		opts, err := parseSSHArgs(s)
		if err != nil {
			return d.errAt("host %q: %s: %v", host, key, err)
		}
		for _, o := range opts {
			if set[o.key] {
				continue
			}
			set[o.key] = true
			if err := applySSHOption(c, o); err != nil {
				return d.errAt("host %q: %s: %s: %v", host, key, o.text, err)
			}
		}
	}
	if c.ProxyJump != "" && c.ProxyCommand != "" {
		return fmt.Errorf("both ProxyJump and ProxyCommand are set in its ssh args; keep one")
	}
	return nil
}

// sshOption is one option from an ssh command line, with the text it was
// written as (for messages).
type sshOption struct {
	key, value, text string
}

// sshFlagOptions are ssh's short flags that take a value and what pgtune
// does with them: an ssh_config keyword it maps, "" for a flag that does
// not change the destination or the host key (ignored).
var sshFlagOptions = map[byte]string{
	'J': "proxyjump", 'p': "port", 'l': "user", 'i': "identityfile", 'F': "-f", 'o': "",
	'c': "", 'D': "", 'E': "", 'e': "", 'L': "", 'm': "", 'O': "", 'R': "", 'S': "",
}

// sshHarmlessFlags take no value and change neither the destination nor
// the host key.
const sshHarmlessFlags = "CqvAaTtxXkKgnsy"

// parseSSHArgs splits an ssh argument string the way Ansible does (shell
// words) and returns its options as keyword=value pairs, keywords lower
// case.
func parseSSHArgs(s string) ([]sshOption, error) {
	words, err := shellWords(s, false)
	if err != nil {
		return nil, err
	}
	var out []sshOption
	for i := 0; i < len(words); i++ {
		w := words[i]
		if len(w) < 2 || w[0] != '-' {
			return nil, fmt.Errorf("%s: expected an ssh option (-o Key=Value)", strconv.Quote(w))
		}
		for j := 1; j < len(w); j++ {
			f := w[j]
			if strings.IndexByte(sshHarmlessFlags, f) >= 0 {
				continue
			}
			key, takesValue := sshFlagOptions[f]
			if !takesValue {
				return nil, fmt.Errorf("-%c is not supported by pgtune", f)
			}
			val := w[j+1:]
			if val == "" {
				if i+1 == len(words) {
					return nil, fmt.Errorf("-%c needs a value", f)
				}
				i++
				val = words[i]
			}
			text := "-" + string(f) + " " + val
			if f == 'o' {
				k, v, ok := splitOption(val)
				if !ok {
					return nil, fmt.Errorf("%s: expected -o Key=Value", text)
				}
				key, val = strings.ToLower(k), v
			}
			if key != "" {
				out = append(out, sshOption{key: key, value: val, text: text})
			}
			break
		}
	}
	return out, nil
}

// splitOption splits "Key=Value" or "Key Value".
func splitOption(s string) (string, string, bool) {
	s = strings.TrimSpace(s)
	i := strings.IndexAny(s, "= \t")
	if i <= 0 {
		return "", "", false
	}
	k, v := s[:i], strings.TrimSpace(s[i+1:])
	v = strings.TrimSpace(strings.TrimPrefix(v, "="))
	return k, v, v != ""
}

// sshIgnoredOptions change neither where pgtune connects nor which host
// key it accepts; pgtune ignores them.
var sshIgnoredOptions = map[string]bool{}

func init() {
	for _, k := range strings.Fields(`ControlMaster ControlPersist ControlPath ServerAliveInterval ServerAliveCountMax
		ForwardAgent Compression ConnectTimeout ConnectionAttempts TCPKeepAlive LogLevel IdentitiesOnly
		PreferredAuthentications PubkeyAuthentication PasswordAuthentication KbdInteractiveAuthentication
		ChallengeResponseAuthentication GSSAPIAuthentication GSSAPIDelegateCredentials Ciphers MACs KexAlgorithms
		SendEnv SetEnv RequestTTY AddKeysToAgent UpdateHostKeys HashKnownHosts ForwardX11 ForwardX11Trusted
		EscapeChar BatchMode ExitOnForwardFailure IPQoS PubkeyAcceptedKeyTypes PubkeyAcceptedAlgorithms
		StreamLocalBindUnlink NumberOfPasswordPrompts ClearAllForwardings LocalForward RemoteForward
		DynamicForward VisualHostKey Protocol UseRoaming ObscureKeystrokeTiming RemoteCommand Tunnel TunnelDevice`) {
		sshIgnoredOptions[strings.ToLower(k)] = true
	}
}

// sshOffValues are options that change the destination or the host key
// unless given these values.
var sshOffValues = map[string][]string{
	"checkhostip": {"no"}, "canonicalizehostname": {"no"}, "addressfamily": {"any"}, "proxyusefdpass": {"no"},
	"verifyhostkeydns": {"no"}, "nohostauthenticationforlocalhost": {"no"}, "permitlocalcommand": {"no"},
	"knownhostscommand": {"none"}, "revokedhostkeys": {"none"},
}

func applySSHOption(c *Conn, o sshOption) error {
	v := o.value
	switch o.key {
	case "proxyjump":
		if !strings.EqualFold(v, "none") {
			c.ProxyJump = v
		}
	case "proxycommand":
		if !strings.EqualFold(v, "none") {
			c.ProxyCommand = v
		}
	case "port":
		if c.Port == 0 {
			p, err := parsePort(v)
			if err != nil {
				return err
			}
			c.Port = p.(int)
		}
	case "user":
		if c.User == "" {
			c.User = v
		}
	case "identityfile":
		if c.PrivateKeyFile == "" {
			c.PrivateKeyFile = v
		}
	case "userknownhostsfile":
		if c.KnownHostsFile == "" {
			files := strings.Fields(v)
			if len(files) != 1 {
				return fmt.Errorf("pgtune takes one UserKnownHostsFile per host")
			}
			c.KnownHostsFile = files[0]
		}
	case "stricthostkeychecking":
		if c.HostKeyChecking == "" {
			switch strings.ToLower(v) {
			case "yes", "ask":
				c.HostKeyChecking = "strict"
			case "no", "off", "accept-new":
				// A changed key is still refused, as on the ssh_config path.
				c.HostKeyChecking = "accept-new"
			default:
				return fmt.Errorf("expected yes, accept-new or no")
			}
		}
	case "-f":
		if c.ConfigFile == "" {
			c.ConfigFile = v
		}
	case "hostkeyalias", "globalknownhostsfile", "hostname":
		return fmt.Errorf("pgtune does not take this option from the inventory (it changes the destination or the host key); put it in the ssh_config named by ssh_config_file instead")
	default:
		if sshIgnoredOptions[o.key] {
			return nil
		}
		for _, off := range sshOffValues[o.key] {
			if strings.EqualFold(v, off) {
				return nil
			}
		}
		if o.key == "hostkeyalgorithms" && strings.HasPrefix(v, "+") {
			return nil
		}
		return fmt.Errorf("not supported by pgtune: it may change where pgtune connects or which host key it accepts, and pgtune will not connect otherwise than ssh(1) would; remove it")
	}
	return nil
}
