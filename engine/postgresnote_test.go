package engine

import (
	"errors"
	"testing"
)

// TestPostgresNote: a failed discovery is never "no cluster found" (it may
// have found several), and is not said twice when the host's error
// already quotes it.
func TestPostgresNote(t *testing.T) {
	const ambiguous = "2 postmasters are running (/a (pid 1), /b (pid 2)): set this host's pg_data in the inventory to the data directory of the one to manage"
	tests := []struct {
		name     string
		discover string
		hostErr  error
		want     string
	}{
		{"none found", "", nil, "no PostgreSQL cluster found"},
		{"none found, host failed otherwise", "", errors.New("hugepages: read /proc/meminfo: denied"), "no PostgreSQL cluster found"},
		{"several, no module needed one", ambiguous, nil, "PostgreSQL cluster not identified: " + ambiguous},
		{"several, a module failed on it", ambiguous, errors.New("oom: find the cluster: " + ambiguous), ""},
		{"several, the host failed otherwise", ambiguous, errors.New("hugepages: allocated 1 of 2 pages"), "PostgreSQL cluster not identified: " + ambiguous},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := postgresNote(tc.discover, tc.hostErr); got != tc.want {
				t.Errorf("postgresNote = %q, want %q", got, tc.want)
			}
		})
	}
}
