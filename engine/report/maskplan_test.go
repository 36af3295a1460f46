package report

import (
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/pgtune/pgtune/engine/plan"
)

// TestMaskPlan: a plan masked in place reports exactly as the plan did
// (masking what is masked already changes nothing), and the report shares
// the plan's strings instead of copying them.
func TestMaskPlan(t *testing.T) {
	auto := "/srv/pg\x1b[2K\r\u202e/postgresql.auto.conf"
	conf := strings.Repeat("#work_mem = 4MB\n", 100) + "#ssl_passphrase_command = ''\nprimary_conninfo = 'host=db0 user=rep password=s3cr3t'\n"
	changes := func() []plan.Change {
		return []plan.Change{
			{Module: "pgconf", Kind: plan.KindFile, Target: auto, Before: conf, After: conf + "include_dir = 'conf.d'\n",
				Diff: "--- a" + auto + "\n+++ b" + auto + "\n@@ -1,1 +1,2 @@\n primary_conninfo = 'host=db0 user=rep password=s3cr3t'\n+include_dir = 'conf.d'\n"},
			{Module: "pgconf", Kind: plan.KindAction, Target: "postgresql://rep:s3cr3t@db0/x", Before: "ssl_passphrase_command = 'echo s3cr3t'", After: "PGPASSWORD=s3cr3t x"},
			{Module: "pgconf", Kind: plan.KindFile, Target: "/etc/patroni.yml", Before: "password: a\n", After: "password: b\n", Diff: "-password: a\n+password: b\n", Sensitive: true},
			{Module: "hugepages", Kind: plan.KindSysctl, Target: "vm.nr_hugepages", Before: "0", After: "3013"},
		}
	}
	want := FromPlan(changes())
	masked := changes()
	MaskPlan(masked)
	got := FromPlan(masked)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("report of the masked plan:\n%+v\nwant:\n%+v", got, want)
	}
	for i := range got {
		for _, pair := range [][2]string{{got[i].Before, masked[i].Before}, {got[i].After, masked[i].After}, {got[i].Diff, masked[i].Diff}} {
			if len(pair[0]) > 0 && unsafe.StringData(pair[0]) != unsafe.StringData(pair[1]) {
				t.Errorf("change %d: the report copied a value of the masked plan", i)
			}
		}
	}
	if b, a := masked[0].Before, masked[0].After; unsafe.StringData(b) != unsafe.StringData(a) {
		t.Error("the before of an extended file is a copy, not the start of its after")
	}
	if strings.Contains(masked[0].Before, "s3cr3t") || masked[2].Before != Masked {
		t.Errorf("plan not masked: %q, %q", masked[0].Before, masked[2].Before)
	}
}
