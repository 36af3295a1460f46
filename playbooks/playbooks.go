// Package playbooks embeds the default policy so that `pgtune check` with
// no playbook argument audits against it.
package playbooks

import _ "embed"

// DefaultName is how the embedded policy is named in messages.
const DefaultName = "playbooks/memory.yml (built in)"

// Default is playbooks/memory.yml.
//
//go:embed memory.yml
var Default []byte
