package expr

import (
	"reflect"
	"testing"
)

func TestExplain(t *testing.T) {
	s := NewScope("policy.yml")
	if err := s.Set("facts", map[string]any{"mem_total": int64(25275226112), "hugepage_size": int64(2 << 20)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Set("hugepages", map[string]any{"pool": int64(6318806528)}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		src  string
		want Explanation
	}{
		{"${floor(facts.mem_total * 0.25)}", Explanation{
			Source: "floor(facts.mem_total * 0.25)", Substituted: "floor(25275226112 * 0.25)",
			Operands: []Operand{{"facts.mem_total", "25275226112"}}, Result: "6318806528"}},
		{"${min(2 * GiB, floor(facts.mem_total / 16))}", Explanation{
			Source: "min(2 * GiB, floor(facts.mem_total / 16))", Substituted: "min(2 * GiB, floor(25275226112 / 16))",
			Operands: []Operand{{"facts.mem_total", "25275226112"}}, Result: "1579701632"}},
		{"${0.8 * (facts.mem_total - hugepages.pool) / KiB + facts.mem_total * 0}", Explanation{
			Source:      "0.8 * (facts.mem_total - hugepages.pool) / KiB + facts.mem_total * 0",
			Substituted: "0.8 * (25275226112 - 6318806528) / KiB + 25275226112 * 0",
			Operands:    []Operand{{"facts.mem_total", "25275226112"}, {"hugepages.pool", "6318806528"}}, Result: "14809702.8"}},
		{"0.8", Explanation{Source: "0.8", Result: "0.8"}},
	} {
		v, err := Parse(tc.src, "policy.yml", 1, 1)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Explain(v)
		if err != nil {
			t.Fatalf("%s: %v", tc.src, err)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.src, got, tc.want)
		}
	}
}
