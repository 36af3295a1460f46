package report

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/pgtune/pgtune/internal/termsafe"
)

// encodeWhole is the document as one json.Encoder call writes it (what
// WriteJSON wrote before it encoded host by host).
func encodeWhole(t *testing.T, r *Report) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(maskNotes(r)); err != nil {
		t.Fatal(err)
	}
	return termsafe.JSON(buf.Bytes())
}

// TestWriteJSONByHost: encoding host by host writes the same bytes as
// encoding the whole report at once, whatever the report holds.
func TestWriteJSONByHost(t *testing.T) {
	withRun := sample()
	withRun.RunID = "20261201T040000Z-a1b2c3"
	tests := []struct {
		name string
		r    *Report
	}{
		{"sample", sample()},
		{"hostile", hostile()},
		{"run id", withRun},
		{"no hosts (nil)", &Report{Mode: "check"}},
		{"no hosts (empty)", &Report{Mode: "apply", RunID: "r<&>", Hosts: []Host{}}},
		{"one host", &Report{Mode: "check", Hosts: []Host{{Name: "db<1>", Status: InPolicy, Changes: []Change{}}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.r.Summarize()
			var got bytes.Buffer
			if err := WriteJSON(&got, tc.r); err != nil {
				t.Fatal(err)
			}
			if want := encodeWhole(t, tc.r); !bytes.Equal(got.Bytes(), want) {
				t.Errorf("host by host:\n%s\nwhole document:\n%s", got.Bytes(), want)
			}
		})
	}
}
