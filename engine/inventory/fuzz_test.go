package inventory

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine/expr"
)

// FuzzInventoryParse: any input either loads into a consistent inventory
// or fails with an error that names the file; it never panics.
func FuzzInventoryParse(f *testing.F) {
	for _, pat := range []string{"testdata/*.yml", "testdata/bad/*.yml", "testdata/corpus/*/hosts", "testdata/corpus/*/*.json"} {
		files, _ := filepath.Glob(pat)
		for _, file := range files {
			if data, err := os.ReadFile(file); err == nil {
				f.Add(data)
			}
		}
	}
	f.Add([]byte("all:\n  hosts:\n    db[1:3]:\n      ssh_port: '22'\n"))
	f.Add([]byte("a: &x {hosts: {h: }}\nb: *x\nc:\n  <<: *x\n  children: {a: }\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		inv, err := Parse("fuzz.yml", data)
		if err != nil {
			var pe *expr.PosError
			if !errors.As(err, &pe) || pe.File != "fuzz.yml" || !strings.HasPrefix(err.Error(), "fuzz.yml:") {
				t.Fatalf("error without file: %#v", err)
			}
			return
		}
		if len(inv.Hosts) == 0 {
			t.Fatal("loaded an inventory without hosts")
		}
		if !slices.IsSortedFunc(inv.Hosts, func(a, b *Host) int { return strings.Compare(a.Name, b.Name) }) {
			t.Fatal("hosts not sorted")
		}
		for _, h := range inv.Hosts {
			c := h.Conn
			if !slices.Contains(h.Groups, "all") {
				t.Fatalf("%s not in all", h.Name)
			}
			if c.Connection != "ssh" && c.Connection != "local" {
				t.Fatalf("connection %q", c.Connection)
			}
			if c.Port < 0 || c.Port > 65535 {
				t.Fatalf("port %d", c.Port)
			}
			for _, s := range []string{c.Address, c.User, c.PrivateKeyFile, c.KnownHostsFile, c.ConfigFile, c.PGData, c.PGBin, c.PGConfigFile, c.PGRestart} {
				if strings.ContainsAny(s, "\n\r\x00") {
					t.Fatalf("unsafe value %q accepted", s)
				}
			}
		}
		all, err := inv.Match("all")
		if err != nil || len(all) != len(inv.Hosts) {
			t.Fatalf("all: %d hosts, %v", len(all), err)
		}
		for i, h := range inv.Hosts {
			if i == 50 {
				break
			}
			if m, err := inv.Match(h.Name); err != nil || len(m) == 0 {
				t.Fatalf("host %q does not match itself: %v", h.Name, err)
			}
		}
	})
}
