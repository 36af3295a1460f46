// Package bench holds the measurements behind the policy, run by
// `make bench`: what 4 kB pages cost each PostgreSQL backend in page tables
// next to 2 MB huge pages, on a real cluster and this machine's kernel.
// The package has no code of its own beyond its benchmarks; see README.md
// for the numbers and how to compare runs.
package bench
