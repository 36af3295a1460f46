package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/internal/testhost"
)

// TestSecretsNeverShown runs the CLI on this machine (local connection)
// with two secrets in the inventory — one by name suffix, one listed in
// pgtune_sensitive — that end up in a planned file's path and in an error
// and a note. No output (JSON, text, diff, debug logs, facts) may show
// them; apply still acts on the real path.
func TestSecretsNeverShown(t *testing.T) {
	if testing.Short() {
		t.Skip("reads this machine's kernel and postgres")
	}
	testhost.WatchKernel(t) // the kernel holds still between plan and apply
	const token, siteKey = "tok-Zq81-do-not-print", "sk-99x-do-not-print"
	work := t.TempDir()
	sysctlDir := filepath.Join(work, "sysctl.d")
	inv := filepath.Join(work, "inventory.yml")
	writeFile(t, inv, `all:
  hosts:
    db1:
      connection: local
      pg_data: /nonexistent/`+siteKey+`
  vars:
    sysctl_dir: `+sysctlDir+`
    api_token: `+token+`
    site_key: `+siteKey+`
    pgtune_sensitive: [site_key]
`)
	// The pool is the machine's own: nothing changes in the kernel, only
	// the file (whose name holds the token) is written.
	hp := `    hugepages:
      pool: "${(facts.hugepages_total - facts.hugepages_surp) * facts.hugepage_size}"
      sysctl_file: "${vars.sysctl_dir}/10-${vars.api_token}.conf"
`
	withPG := filepath.Join(work, "with-pg.yml")
	writeFile(t, withPG, "- name: p\n  hosts: ungrouped\n  policy:\n"+hp+"    pgconf:\n      restart: false\n")
	kernelOnly := filepath.Join(work, "kernel.yml")
	writeFile(t, kernelOnly, "- name: p\n  hosts: ungrouped\n  policy:\n"+hp)

	run := func(wantCode int, args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		app := newApp()
		app.Stdin, app.Stdout, app.Stderr = strings.NewReader(""), &out, &errOut
		app.IsTerminal = func() bool { return false }
		code := app.Run(args)
		all := out.String() + errOut.String()
		if code != wantCode {
			t.Errorf("pgtune %s: exit %d, want %d\n%s", strings.Join(args, " "), code, wantCode, all)
		}
		for _, s := range []string{token, siteKey} {
			if strings.Contains(all, s) {
				t.Errorf("pgtune %s shows a secret:\n%s", strings.Join(args, " "), all)
			}
		}
		return all
	}

	// check: the file change is masked (its path holds the token); the
	// error and note naming pg_data are masked; debug logs too.
	out := run(1, "check", "-v", "-i", inv, "--format", "json", withPG)
	for _, want := range []string{`"status": "failed"`, `"before": "(sensitive)"`, `"target": "` + sysctlDir + `/10-(sensitive).conf"`, `pg_data /nonexistent/(sensitive)`} {
		if !strings.Contains(out, want) {
			t.Errorf("check JSON lacks %q:\n%s", want, out)
		}
	}
	run(1, "check", "-v", "-i", inv, withPG)
	out = run(0, "facts", "-i", inv, "--format", "json")
	if !strings.Contains(out, "(sensitive)") {
		t.Errorf("facts JSON masks nothing:\n%s", out)
	}
	run(0, "facts", "-v", "-i", inv)

	// apply writes the real file, and reports it masked.
	out = run(0, "apply", "--yes", "-v", "-i", inv, "--format", "json", kernelOnly)
	if !strings.Contains(out, `"status": "changed"`) || !strings.Contains(out, "(sensitive)") {
		t.Errorf("apply:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(sysctlDir, "10-"+token+".conf")); err != nil {
		t.Errorf("apply did not write the file at its real path: %v", err)
	}
	run(0, "check", "-i", inv, kernelOnly)
}
