package report

import (
	"bytes"
	"encoding/xml"
	"strings"
	"testing"
)

// TestJUnitDecodes: the document is XML a CI system reads back: one case
// per host, drift and failures as failures carrying the plan or error.
func TestJUnitDecodes(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteJUnit(&buf, sample()); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Suite    struct {
			Cases []struct {
				Name    string `xml:"name,attr"`
				Failure *struct {
					Message string `xml:"message,attr"`
					Type    string `xml:"type,attr"`
					Text    string `xml:",chardata"`
				} `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("not XML: %v\n%s", err, buf.String())
	}
	if doc.Tests != 4 || doc.Failures != 3 || len(doc.Suite.Cases) != 4 {
		t.Fatalf("tests=%d failures=%d cases=%d, want 4, 3, 4", doc.Tests, doc.Failures, len(doc.Suite.Cases))
	}
	want := map[string]struct{ typ, text string }{
		"db1": {"drift", "vm.nr_hugepages: 0 → 3013 pages"},
		"db2": {"unreachable", "connect: dial tcp 10.0.0.2:22: connection refused"},
		"db3": {"failed", "allocated 2911 of 3013 huge pages"},
	}
	for _, c := range doc.Suite.Cases {
		w, failing := want[c.Name]
		switch {
		case !failing && c.Failure != nil:
			t.Errorf("%s: in policy but failed: %+v", c.Name, c.Failure)
		case failing && c.Failure == nil:
			t.Errorf("%s: no failure", c.Name)
		case failing && (c.Failure.Type != w.typ || !strings.Contains(c.Failure.Text, w.text)):
			t.Errorf("%s: failure %+v, want type %s with %q", c.Name, c.Failure, w.typ, w.text)
		}
	}
}
