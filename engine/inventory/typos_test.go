package inventory

import (
	"reflect"
	"strings"
	"testing"
)

func TestTypoOf(t *testing.T) {
	for _, tc := range []struct {
		key, near string
		typo      bool
	}{
		{"pg_dta", "pg_data", true},
		{"ssh_prot", "ssh_port", true},
		{"becom", "become", true},
		{"pgtune_sensitve", "pgtune_sensitive", true},
		{"pgtune_restart_partial_clustr", "pgtune_restart_partial_cluster", true},
		{"pgtune_whatever", "", true}, // pgtune's prefix, not its key
		// Keys of pgtune's and Ansible's, and other tools' vars.
		{"pg_data", "", false},
		{"ansible_host", "", false},
		{"ansible_hots", "", false}, // the ansible_* warning says it
		{"pgtune_sensitive", "", false},
		{"pg_version", "", false},
		{"pg_port", "", false},
		{"pg_dir", "", false}, // two edits from pg_bin: too short to guess
		{"app_key", "", false},
		{"postgresql_data_dir", "", false},
	} {
		near, typo := typoOf(tc.key)
		if near != tc.near || typo != tc.typo {
			t.Errorf("typoOf(%q) = %q, %v; want %q, %v", tc.key, near, typo, tc.near, tc.typo)
		}
	}
}

// TestTypoWarnings: a mistyped key is said once where it is written, not
// once per host it reaches.
func TestTypoWarnings(t *testing.T) {
	inv, err := Parse("inv.yml", []byte("all:\n  vars:\n    pgtune_sensitve: [app_key]\n  hosts:\n    db1: {pg_dta: /x, app_key: k}\n    db2:\n    db3:\n"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range inv.Warnings {
		if strings.Contains(w, "not a pgtune key") {
			got = append(got, w)
		}
	}
	want := []string{
		"inventory: inv.yml:3: pgtune_sensitve is not a pgtune key (did you mean pgtune_sensitive?): it is kept as a plain var and does nothing",
		"inventory: inv.yml:5: pg_dta is not a pgtune key (did you mean pg_data?): it is kept as a plain var and does nothing",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("warnings\n got: %q\nwant: %q", got, want)
	}
}
