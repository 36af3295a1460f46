package report

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/pgtune/pgtune/engine/plan"
)

// benchFleet is a check over n hosts in the proportions a first audit of a
// fleet shows: most hosts drift on all three modules (sysctls, file diffs,
// a restart), some are in policy, a few failed or unreachable.
func benchFleet(n int) *Report {
	r := &Report{Mode: "check", RunID: "20260714T080000Z-abcdef"}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("db%04d.eu-west.example.com", i)
		h := Host{Name: name, Changes: []Change{}}
		switch {
		case i%20 == 7:
			h.Status = Unreachable
			msg := name + ": connect: dial tcp 10.0.3.7:22: connect: connection refused"
			h.Error = &msg
		case i%20 == 13:
			h.Status = Failed
			msg := name + ": hugepages: allocated 2911 of 3013 huge pages"
			h.Error = &msg
		case i%5 == 0:
			h.Status = InPolicy
		default:
			h.Status = Drift
			pages := 3000 + i%50
			h.Changes = FromPlan([]plan.Change{
				{Module: "hugepages", Kind: plan.KindSysctl, Target: "vm.nr_hugepages", Before: "0", After: fmt.Sprint(pages)},
				{Module: "hugepages", Kind: plan.KindFile, Target: "/etc/sysctl.d/10-hugepages.conf",
					After: fmt.Sprintf("vm.nr_hugepages = %d\n", pages),
					Diff:  fmt.Sprintf("--- /etc/sysctl.d/10-hugepages.conf\n+++ /etc/sysctl.d/10-hugepages.conf\n@@ -0,0 +1 @@\n+vm.nr_hugepages = %d\n", pages)},
				{Module: "pgconf", Kind: plan.KindFile, Target: "/etc/postgresql/15/main/conf.d/002-hugepages.conf",
					After: fmt.Sprintf("huge_pages = 'on'\nhuge_page_size = 0\nshared_buffers = %dkB\n", pages*2048-40960),
					Diff:  fmt.Sprintf("--- a\n+++ b\n@@ -0,0 +1,3 @@\n+huge_pages = 'on'\n+huge_page_size = 0\n+shared_buffers = %dkB\n", pages*2048-40960)},
				{Module: "pgconf", Kind: plan.KindRestart, Target: "restart postgresql", Before: "shared_buffers=128MB", After: fmt.Sprintf("shared_buffers=%dkB", pages*2048-40960)},
				{Module: "overcommit", Kind: plan.KindSysctl, Target: "vm.overcommit_memory", Before: "0", After: "2"},
				{Module: "overcommit", Kind: plan.KindSysctl, Target: "vm.overcommit_kbytes", Before: "0", After: "12345678"},
				{Module: "overcommit", Kind: plan.KindFile, Target: "/etc/sysctl.d/99-overcommit.conf",
					After: "vm.overcommit_memory = 2\nvm.overcommit_kbytes = 12345678\n",
					Diff:  "--- a\n+++ b\n@@ -0,0 +1,2 @@\n+vm.overcommit_memory = 2\n+vm.overcommit_kbytes = 12345678\n"},
			})
			h.Notes = []string{"pgconf: restart needed for shared_buffers"}
		}
		r.Hosts = append(r.Hosts, h)
	}
	r.Summarize()
	return r
}

func BenchmarkRender(b *testing.B) {
	r := benchFleet(1000)
	for _, tc := range []struct {
		name  string
		write func(*bytes.Buffer, *Report) error
	}{
		{"text/1000-hosts", func(w *bytes.Buffer, r *Report) error { return WriteText(w, r) }},
		{"json/1000-hosts", func(w *bytes.Buffer, r *Report) error { return WriteJSON(w, r) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var buf bytes.Buffer
			if err := tc.write(&buf, r); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(buf.Len())) // MB/s of rendered output
			for b.Loop() {
				buf.Reset()
				if err := tc.write(&buf, r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkSummarize(b *testing.B) {
	r := benchFleet(1000)
	for b.Loop() {
		r.Summarize()
	}
	if r.Summary.Hosts != 1000 || r.Summary.Drift == 0 || r.Summary.Unreachable == 0 {
		b.Fatalf("summary %+v", r.Summary)
	}
}
