package playbook

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine/expr"
)

// FuzzPlaybookParse: any input loads or fails with errors that each name
// the file; it never panics, and a loaded playbook is complete.
func FuzzPlaybookParse(f *testing.F) {
	for _, pat := range []string{"testdata/*.yml", "testdata/bad/*.yml"} {
		files, _ := filepath.Glob(pat)
		for _, file := range files {
			if data, err := os.ReadFile(file); err == nil {
				f.Add(data)
			}
		}
	}
	f.Add([]byte("- hosts: all\n  policy:\n    pgconf: &p\n      limits: {max: '${x}', min: 1}\n      extra: {a: b}\n- hosts: b\n  policy: {pgconf: *p}\n"))
	reg := testRegistry()
	f.Fuzz(func(t *testing.T, data []byte) {
		pb, err := Parse("fuzz.yml", data, reg)
		if err != nil {
			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(line, "fuzz.yml:") {
					t.Fatalf("error line without file: %q in %q", line, err)
				}
			}
			var pe *expr.PosError
			if !errors.As(err, &pe) {
				t.Fatalf("not a PosError: %#v", err)
			}
			return
		}
		if len(pb.Plays) == 0 {
			t.Fatal("loaded a playbook without plays")
		}
		for _, p := range pb.Plays {
			if p.Hosts == "" || len(p.Sections) == 0 || len(p.Policy) != len(p.Sections) {
				t.Fatalf("incomplete play: %+v", p)
			}
			for _, s := range p.Sections {
				if p.Policy[s] == nil {
					t.Fatalf("section %s without params", s)
				}
			}
		}
	})
}
