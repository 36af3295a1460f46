package report

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/pgtune/pgtune/engine/plan"
)

var update = flag.Bool("update", false, "rewrite golden files")

func sample() *Report {
	errMsg := "db2: connect: dial tcp 10.0.0.2:22: connection refused"
	failMsg := "db3: hugepages: allocated 2911 of 3013 huge pages"
	r := &Report{Mode: "check", Hosts: []Host{
		{Name: "db1", Status: Drift, Changes: FromPlan([]plan.Change{
			{Module: "hugepages", Kind: plan.KindSysctl, Target: "vm.nr_hugepages", Before: "0", After: "3013"},
			{Module: "hugepages", Kind: plan.KindFile, Target: "/etc/sysctl.d/10-hugepages.conf", After: "vm.nr_hugepages = 3013\n",
				Diff: "--- /etc/sysctl.d/10-hugepages.conf\n+++ /etc/sysctl.d/10-hugepages.conf\n@@ -0,0 +1 @@\n+vm.nr_hugepages = 3013\n"},
			{Module: "pgconf", Kind: plan.KindRestart, Target: "restart postgresql", Before: "shared_buffers=128MB", After: "shared_buffers=6012MB"},
			{Module: "pgconf", Kind: plan.KindAction, Target: "password", Before: "hunter2", After: "swordfish", Sensitive: true},
		}), Notes: []string{"restart needed"}},
		{Name: "db2", Status: Unreachable, Changes: []Change{}, Error: &errMsg},
		{Name: "db3", Status: Failed, Changes: []Change{}, Error: &failMsg},
		{Name: "db4", Status: InPolicy, Changes: []Change{}},
	}}
	r.Summarize()
	return r
}

func TestRenderGolden(t *testing.T) {
	for _, tc := range []struct {
		file  string
		write func(*bytes.Buffer, *Report) error
	}{
		{"check.txt", func(b *bytes.Buffer, r *Report) error { return WriteText(b, r) }},
		{"check.json", func(b *bytes.Buffer, r *Report) error { return WriteJSON(b, r) }},
	} {
		t.Run(tc.file, func(t *testing.T) {
			var buf bytes.Buffer
			if err := tc.write(&buf, sample()); err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", tc.file)
			if *update {
				if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(buf.Bytes(), want) {
				t.Errorf("rendered output differs from %s (go test -update to accept):\n%s", golden, buf.String())
			}
		})
	}
}

func TestJSONContract(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteJSON(&buf, sample()); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Hosts []struct {
			Name    string            `json:"name"`
			Status  string            `json:"status"`
			Changes []json.RawMessage `json:"changes"`
			Error   *string           `json:"error"`
		} `json:"hosts"`
		Summary map[string]int `json:"summary"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"hosts": 4, "in_policy": 1, "drift": 1, "changed": 0, "ok": 0, "failed": 1, "unreachable": 1}
	for k, v := range want {
		if doc.Summary[k] != v {
			t.Errorf("summary[%s] = %d, want %d", k, doc.Summary[k], v)
		}
	}
	if doc.Hosts[0].Changes == nil || len(doc.Hosts[0].Changes) != 4 {
		t.Fatalf("changes = %v", doc.Hosts[0].Changes)
	}
	var c map[string]any
	_ = json.Unmarshal(doc.Hosts[0].Changes[3], &c)
	if c["before"] != Masked || c["after"] != Masked {
		t.Errorf("sensitive change not masked: %v", c)
	}
	if doc.Hosts[3].Changes == nil {
		t.Error("changes must be [] not null for a host in policy")
	}
}

func TestExitCode(t *testing.T) {
	tests := []struct {
		statuses []Status
		want     int
	}{
		{[]Status{InPolicy, InPolicy}, 0},
		{[]Status{InPolicy, Drift}, 2},
		{[]Status{Drift, Failed}, 1},
		{[]Status{Unreachable}, 1},
		{[]Status{Changed, OK}, 0},
	}
	for _, tt := range tests {
		r := &Report{}
		for _, s := range tt.statuses {
			r.Hosts = append(r.Hosts, Host{Status: s})
		}
		r.Summarize()
		if got := r.ExitCode(); got != tt.want {
			t.Errorf("%v: exit %d, want %d", tt.statuses, got, tt.want)
		}
	}
}
