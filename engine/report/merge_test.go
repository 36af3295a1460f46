package report

import (
	"bytes"
	"strings"
	"testing"
)

// doc renders a report of hosts (name:status) as a shard job prints it.
func doc(t *testing.T, runID string, hosts ...string) []byte {
	t.Helper()
	r := &Report{RunID: runID, Hosts: []Host{}}
	for _, hs := range hosts {
		name, status, _ := strings.Cut(hs, ":")
		h := Host{Name: name, Status: Status(status), Changes: []Change{}}
		if status == string(Failed) {
			msg := "hugepages: allocated 2911 of 3013 pages"
			h.Error = &msg
		}
		if status == string(Drift) {
			h.Changes = []Change{{Module: "overcommit", Target: "vm.overcommit_memory", Before: "0", After: "2", Kind: "sysctl", Action: "update"}}
		}
		r.Hosts = append(r.Hosts, h)
	}
	r.Summarize()
	var buf bytes.Buffer
	if err := WriteJSON(&buf, r); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestMerge(t *testing.T) {
	tests := []struct {
		name  string
		parts map[string][]byte
		want  Summary
		order string
		mode  Mode
		runID string
		// runIDs: the run ids of apply shards of several runs, joined.
		runIDs string
		exit   int
	}{{
		name:  "check shards, drift",
		parts: map[string][]byte{"1.json": doc(t, "", "db3:in_policy", "db1:drift"), "2.json": doc(t, "", "db2:in_policy")},
		want:  Summary{Hosts: 3, InPolicy: 2, Drift: 1}, order: "db1 db2 db3", mode: ModeCheck, exit: 2,
	}, {
		name:  "a failure anywhere wins over drift",
		parts: map[string][]byte{"1.json": doc(t, "", "db1:drift"), "2.json": doc(t, "", "db2:failed", "db4:skipped")},
		want:  Summary{Hosts: 3, Drift: 1, Failed: 1, Skipped: 1}, order: "db1 db2 db4", mode: ModeCheck, exit: 1,
	}, {
		name:  "apply shards of one run keep its id",
		parts: map[string][]byte{"1.json": doc(t, "R1", "db1:changed"), "2.json": doc(t, "R1", "db2:ok")},
		want:  Summary{Hosts: 2, Changed: 1, OK: 1}, order: "db1 db2", mode: ModeApply, runID: "R1", exit: 0,
	}, {
		name:  "apply shards of different runs keep every id, sorted",
		parts: map[string][]byte{"1.json": doc(t, "R2", "db1:changed"), "2.json": doc(t, "R1", "db2:unreachable"), "3.json": doc(t, "R2", "db3:ok")},
		want:  Summary{Hosts: 3, Changed: 1, OK: 1, Unreachable: 1}, order: "db1 db2 db3", mode: ModeApply, runIDs: "R1 R2", exit: 1,
	}, {
		name:  "apply shards whose hosts all failed are apply",
		parts: map[string][]byte{"1.json": doc(t, "R1", "db1:failed"), "2.json": doc(t, "R1", "db2:unreachable")},
		want:  Summary{Hosts: 2, Failed: 1, Unreachable: 1}, order: "db1 db2", mode: ModeApply, runID: "R1", exit: 1,
	}, {
		name:  "check shards whose hosts all failed",
		parts: map[string][]byte{"1.json": doc(t, "", "db1:failed"), "2.json": doc(t, "", "db2:unreachable")},
		want:  Summary{Hosts: 2, Failed: 1, Unreachable: 1}, order: "db1 db2", mode: ModeCheck, exit: 1,
	}, {
		name:  "an empty shard of an apply",
		parts: map[string][]byte{"1.json": doc(t, "R1", "db1:changed"), "2.json": doc(t, "")},
		want:  Summary{Hosts: 1, Changed: 1}, order: "db1", mode: ModeApply, runID: "R1", exit: 0,
	}, {
		name:  "merged reports merge again",
		parts: map[string][]byte{"1.json": []byte(`{"run_ids": ["R1", "R3"], "hosts": [{"name": "db1", "status": "ok", "changes": []}], "summary": {"hosts": 1, "ok": 1}}`), "2.json": doc(t, "R2", "db2:ok")},
		want:  Summary{Hosts: 2, OK: 2}, order: "db1 db2", mode: ModeApply, runIDs: "R1 R2 R3", exit: 0,
	}, {
		name:  "an empty shard",
		parts: map[string][]byte{"1.json": doc(t, ""), "2.json": doc(t, "", "db1:in_policy")},
		want:  Summary{Hosts: 1, InPolicy: 1}, order: "db1", mode: ModeCheck, exit: 0,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Merge(partsOf(tt.parts))
			if err != nil {
				t.Fatal(err)
			}
			if r.Summary != tt.want {
				t.Errorf("summary = %+v, want %+v", r.Summary, tt.want)
			}
			var names []string
			for _, h := range r.Hosts {
				names = append(names, h.Name)
			}
			if got := strings.Join(names, " "); got != tt.order {
				t.Errorf("hosts = %q, want %q", got, tt.order)
			}
			if r.Mode != tt.mode || r.RunID != tt.runID || strings.Join(r.RunIDs, " ") != tt.runIDs || r.ExitCode() != tt.exit {
				t.Errorf("mode %q run %q runs %q exit %d, want %q %q %q %d", r.Mode, r.RunID, r.RunIDs, r.ExitCode(), tt.mode, tt.runID, tt.runIDs, tt.exit)
			}
			var buf bytes.Buffer
			if err := WriteJSON(&buf, r); err != nil {
				t.Fatal(err)
			}
			if back, err := readDocument(Part{Name: "merged", Data: buf.Bytes()}); err != nil || back.RunID != tt.runID || strings.Join(back.RunIDs, " ") != tt.runIDs {
				t.Errorf("the merged document's runs read back as %+v, %v:\n%s", back, err, buf.String())
			}
		})
	}
}

// TestMergeKeepsHosts: a merged document holds each host exactly as its
// shard printed it (changes, errors), in the single run's shape.
func TestMergeKeepsHosts(t *testing.T) {
	one := doc(t, "", "db1:drift", "db2:failed")
	r, err := Merge([]Part{{Name: "1.json", Data: one}})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteJSON(&buf, r); err != nil {
		t.Fatal(err)
	}
	if buf.String() != string(one) {
		t.Errorf("one part merged is not the same document:\n%s\nwant:\n%s", buf.String(), one)
	}
}

func TestMergeRefuses(t *testing.T) {
	good := doc(t, "", "db1:in_policy")
	tests := []struct {
		name  string
		parts []Part
		want  string
	}{
		{"nothing", nil, "no report to merge"},
		{"a file twice", []Part{{"1.json", good}, {"1.json", good}}, "1.json is given twice"},
		{"a host twice in a file", []Part{{"1.json", doc(t, "", "db1:drift", "db1:drift")}}, `1.json: host "db1" is listed twice`},
		{"a host twice", []Part{{"1.json", good}, {"2.json", doc(t, "", "db1:drift")}}, `2.json: host "db1" is also in 1.json`},
		{"check and apply", []Part{{"1.json", good}, {"2.json", doc(t, "R", "db2:changed")}}, `2.json: host "db2" has status "changed" of an apply report, and 1.json is a check report`},
		{"check and apply, its hosts all failed", []Part{{"1.json", good}, {"2.json", doc(t, "R", "db2:failed")}}, `2.json: an apply report (it has a run_id), and 1.json is a check report`},
		{"check and apply, all failed", []Part{{"1.json", doc(t, "", "db1:unreachable")}, {"2.json", doc(t, "R", "db2:failed")}}, `2.json: an apply report (it has a run_id), and 1.json is a check report`},
		{"apply and check, all failed", []Part{{"1.json", doc(t, "R", "db2:failed")}, {"2.json", doc(t, "", "db1:unreachable")}}, `2.json: a check report (it has no run_id, which every apply report has), and 1.json is an apply report`},
		{"apply and check", []Part{{"1.json", doc(t, "R", "db2:failed")}, {"2.json", good}}, `2.json: host "db1" has status "in_policy" of a check report, and 1.json is an apply report`},
		{"not JSON", []Part{{"1.json", good}, {"x.json", []byte("{\n\"hosts\": [\n,]}")}}, "x.json: not a pgtune JSON report: line 3"},
		{"other JSON", []Part{{"x.json", []byte(`{"name": "x"}`)}}, `x.json: not a pgtune JSON report: it has no "hosts" and "summary"`},
		{"two documents", []Part{{"x.json", append(append([]byte{}, good...), good...)}}, "x.json: more than one JSON document"},
		{"unknown status", []Part{{"x.json", []byte(`{"hosts":[{"name":"db1","status":"great"}],"summary":{"hosts":1}}`)}}, `x.json: host "db1": unknown status "great"`},
		{"no name", []Part{{"x.json", []byte(`{"hosts":[{"status":"ok"}],"summary":{"hosts":1,"ok":1}}`)}}, "x.json: hosts[0] has no name"},
		{"summary off", []Part{{"x.json", []byte(`{"hosts":[{"name":"db1","status":"ok"}],"summary":{"hosts":2,"ok":2}}`)}}, "x.json: its summary does not count its hosts (1 hosts listed, summary says 2)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Merge(tt.parts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func partsOf(m map[string][]byte) []Part {
	var out []Part
	for _, name := range []string{"1.json", "2.json", "3.json"} {
		if d, ok := m[name]; ok {
			out = append(out, Part{Name: name, Data: d})
		}
	}
	return out
}

// TestMergeNotReached: hosts an apply shard's rollout never tried are
// failed in its document, their error "not reached: …"; the merged text
// says not reached, as each shard's did.
func TestMergeNotReached(t *testing.T) {
	part := []byte(`{"run_id": "R1", "hosts": [` +
		`{"name": "db1", "status": "failed", "changes": [], "error": "db1: mark: refused"},` +
		`{"name": "db2", "status": "failed", "changes": [], "error": "not reached: the rollout stopped: any_errors_fatal: 1 host failed"}` +
		`], "summary": {"hosts": 2, "failed": 2}}`)
	r, err := Merge([]Part{{Name: "1.json", Data: part}})
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	if err := WriteText(&text, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "db2: not reached\n") || !strings.HasSuffix(text.String(), "2 hosts: 1 failed, 1 not reached\n") {
		t.Errorf("text:\n%s", text.String())
	}
	var doc bytes.Buffer
	if err := WriteJSON(&doc, r); err != nil {
		t.Fatal(err)
	}
	if strings.Count(doc.String(), `"status": "failed"`) != 2 || !strings.Contains(doc.String(), `"failed": 2,`) {
		t.Errorf("JSON changed:\n%s", doc.String())
	}
}
