package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine/plan"
)

// TestQuotedCurlUserMasked: curl credentials quoted in restore_command
// and archive_command (audit h98) are masked in every rendering of a
// planned file change: before, after and the diff's context.
func TestQuotedCurlUserMasked(t *testing.T) {
	const auto = "/data/postgresql.auto.conf"
	before := "restore_command = 'curl -u ''walfetch:S3cr3tPw'' https://wal/%f -o %p'\narchive_command = 'curl -u \"wal:Arch1vePw\" -T %p https://wal/%f'\nwork_mem = '4MB'\n"
	after := "restore_command = 'curl -u ''walfetch:S3cr3tPw'' https://wal/%f -o %p'\narchive_command = 'curl -u \"wal:Arch1vePw\" -T %p https://wal/%f'\nwork_mem = '8MB'\n"
	diff := "--- a" + auto + "\n+++ b" + auto + "\n@@ -1,3 +1,3 @@\n restore_command = 'curl -u ''walfetch:S3cr3tPw'' https://wal/%f -o %p'\n" +
		" archive_command = 'curl -u \"wal:Arch1vePw\" -T %p https://wal/%f'\n-work_mem = '4MB'\n+work_mem = '8MB'\n"
	errMsg := "db1: pgconf: restart postgres: curl -u 'admin:pa$$w0rd' -X POST https://ctl/restart: exit status 22"
	r := &Report{Mode: ModeCheck, Hosts: []Host{{Name: "db1", Status: Failed, Error: &errMsg, Changes: FromPlan([]plan.Change{
		{Module: "pgconf", Kind: plan.KindFile, Target: auto, Before: before, After: after, Diff: diff},
	})}}}
	r.Summarize()
	var text, doc bytes.Buffer
	if err := WriteText(&text, r); err != nil {
		t.Fatal(err)
	}
	if err := WriteJSON(&doc, r); err != nil {
		t.Fatal(err)
	}
	for name, out := range map[string]string{"text": text.String(), "json": doc.String()} {
		for _, secret := range []string{"S3cr3tPw", "Arch1vePw", "pa$$w0rd"} {
			if strings.Contains(out, secret) {
				t.Errorf("%s output shows %q:\n%s", name, secret, out)
			}
		}
	}
	if c := r.Hosts[0].Changes[0]; !strings.Contains(c.After, "curl -u ''walfetch:(sensitive)'' https://wal/%f") {
		t.Errorf("after %q: want the user kept and the password masked", c.After)
	}
}
