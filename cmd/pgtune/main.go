// Command pgtune puts PostgreSQL hosts on a safe memory policy: huge pages
// reserved and verified, shared_buffers sized to the pool, strict overcommit.
package main

import (
	"os"
)

func main() {
	stopProfile := startMemProfile() // memprofile.go; off unless PGTUNE_MEMPROFILE is set
	code := newApp().Run(os.Args[1:])
	stopProfile()
	os.Exit(code)
}
