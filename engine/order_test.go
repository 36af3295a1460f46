package engine

import (
	"reflect"
	"testing"
)

func TestOrder(t *testing.T) {
	memory := map[string][]string{
		"hugepages":  nil,
		"pgconf":     {"hugepages"},
		"overcommit": {"hugepages", "pgconf"},
	}
	tests := []struct {
		name    string
		names   []string
		deps    map[string][]string
		want    []string
		wantErr string
	}{
		{"yaml order ignored", []string{"overcommit", "pgconf", "hugepages"}, memory,
			[]string{"hugepages", "pgconf", "overcommit"}, ""},
		{"already ordered", []string{"hugepages", "pgconf", "overcommit"}, memory,
			[]string{"hugepages", "pgconf", "overcommit"}, ""},
		{"missing requirement ignored", []string{"overcommit", "pgconf"}, memory,
			[]string{"pgconf", "overcommit"}, ""},
		{"single", []string{"overcommit"}, memory, []string{"overcommit"}, ""},
		{"independent sorted by name", []string{"c", "a", "b"}, map[string][]string{},
			[]string{"a", "b", "c"}, ""},
		{"cycle", []string{"a", "b", "c"}, map[string][]string{"a": {"c"}, "b": {"a"}, "c": {"b"}},
			nil, "module dependency cycle: a → c → b → a"},
		{"self cycle", []string{"a"}, map[string][]string{"a": {"a"}},
			nil, "module dependency cycle: a → a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Order(tt.names, func(n string) []string { return tt.deps[n] })
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}
