// Command syspaths prints the system files a binary built with its flags
// reads (TestLDFlags).
package main

import (
	"fmt"

	"github.com/pgtune/pgtune/internal/syspaths"
)

func main() { fmt.Printf("%q %q\n", syspaths.SSHConfig, syspaths.AnsibleConfig) }
