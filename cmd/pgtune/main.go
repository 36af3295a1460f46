// Command pgtune puts PostgreSQL hosts on a safe memory policy: huge pages
// reserved and verified, shared_buffers sized to the pool, strict overcommit.
package main

import (
	"os"
)

func main() {
	os.Exit(newApp().Run(os.Args[1:]))
}
