package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseExtraVars(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"vars.yml":     "# site\npool_gib: 3\nname: db\nratios: [0.5, 0.8]\n",
		"vars.json":    "{\"pool_gib\": 4, \"nested\": {\"a\": true}}\n",
		"empty.yml":    "",
		"bad.yml":      "a: 1\nb: [1, 2\n",
		"list.yml":     "- a\n- b\n",
		"conn.yml":     "x: 1\nansible_user: root\n",
		"jinja.yml":    "x: 1\npool: \"{{ ram * 0.25 }}\"\n",
		"vault.yml":    "x: 1\npassword: !vault |\n  $ANSIBLE_VAULT;1.1;AES256\n  6162\n",
		"dup.yml":      "a: 1\na: 2\n",
		"emptykey.yml": "\"\": 1\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	at := func(name string) string { return "@" + filepath.Join(dir, name) }
	tests := []struct {
		name string
		args []string
		want map[string]any
		err  string // substring of the error; "" for none
	}{
		{"pairs", []string{"a=1 b=true c=x", "d=0.5"}, map[string]any{"a": 1, "b": true, "c": "x", "d": 0.5}, ""},
		{"quoted value is a string", []string{`a="1" b='two words' c=it\ is`}, map[string]any{"a": "1", "b": "two words", "c": "it is"}, ""},
		{"empty value", []string{"a= b=''"}, map[string]any{"a": "", "b": ""}, ""},
		{"a value with = in it", []string{"conn=host=db1"}, map[string]any{"conn": "host=db1"}, ""},
		{"collection-looking value stays a string", []string{"a=[1,2]"}, map[string]any{"a": "[1,2]"}, ""},
		{"later wins", []string{"a=1", "a=2"}, map[string]any{"a": 2}, ""},
		{"yaml file", []string{at("vars.yml")}, map[string]any{"pool_gib": 3, "name": "db", "ratios": []any{0.5, 0.8}}, ""},
		{"json file, then a pair over it", []string{at("vars.json"), "pool_gib=5"}, map[string]any{"pool_gib": 5, "nested": map[string]any{"a": true}}, ""},
		{"empty file", []string{at("empty.yml")}, map[string]any{}, ""},
		{"inline json", []string{`{"a": 1, "b": [1, 2]}`}, map[string]any{"a": 1, "b": []any{1, 2}}, ""},
		{"inline yaml", []string{`{a: 1, b: x}`}, map[string]any{"a": 1, "b": "x"}, ""},

		{"no =", []string{"novalue"}, nil, `-e "novalue": expected KEY=VALUE, @FILE or {inline vars}`},
		{"empty key", []string{"=1"}, nil, "expected KEY=VALUE"},
		{"blank", []string{"  "}, nil, "expected KEY=VALUE"},
		{"unterminated quote", []string{"a='x"}, nil, "unterminated ' quote"},
		{"connection key", []string{"ansible_user=root"}, nil, "-e ansible_user: connection settings come from the inventory, not -e"},
		{"jinja pair", []string{"pool={{x}}"}, nil, "-e pool: \"{{x}}\" is a Jinja template"},
		{"missing file", []string{"@" + dir + "/none.yml"}, nil, "-e @" + dir + "/none.yml: open "},
		{"no file name", []string{"@"}, nil, "-e @: no file named after @"},
		{"malformed file", []string{at("bad.yml")}, nil, filepath.Join(dir, "bad.yml") + ":"},
		{"list file", []string{at("list.yml")}, nil, filepath.Join(dir, "list.yml") + ":1:1: extra vars must be a mapping"},
		{"connection key in a file", []string{at("conn.yml")}, nil, filepath.Join(dir, "conn.yml") + ":2:1: ansible_user: connection settings come from the inventory"},
		{"jinja in a file", []string{at("jinja.yml")}, nil, filepath.Join(dir, "jinja.yml") + ":2:7: pool: \"{{ ram * 0.25 }}\" is a Jinja template"},
		{"vault in a file", []string{at("vault.yml")}, nil, filepath.Join(dir, "vault.yml") + ":2:11: password is encrypted with Ansible Vault"},
		{"duplicate key", []string{at("dup.yml")}, nil, filepath.Join(dir, "dup.yml") + ":2"},
		{"empty key in a file", []string{at("emptykey.yml")}, nil, filepath.Join(dir, "emptykey.yml") + ":1:1: a var name must be a non-empty string"},
		{"inline list", []string{"[1, 2]"}, nil, "inline vars must be a mapping"},
		{"inline malformed", []string{"{a: 1"}, nil, "-e:1:"},
		{"inline connection key", []string{`{"ssh_port": 22}`}, nil, "-e:1:2: ssh_port: connection settings"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseExtraVars(tt.args)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %#v\nwant %#v", got, tt.want)
			}
		})
	}
}
