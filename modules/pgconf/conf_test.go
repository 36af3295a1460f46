package pgconf

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/aymanbagabas/go-udiff"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

func golden(t *testing.T, name, got string) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(p, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from golden:\n%s", name, udiff.Unified("want", "got", string(want), got))
	}
}

func TestParseConf(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []entry
		wantErr string
	}{
		{"settings, spaces and comments", "# comment\n\nshared_buffers = 128MB\t# default\n  huge_pages='try'\nwork_mem 4MB\n",
			[]entry{
				{Line: 3, Name: "shared_buffers", Value: "128MB", Text: "shared_buffers = 128MB\t# default"},
				{Line: 4, Name: "huge_pages", Value: "try", Text: "  huge_pages='try'"},
				{Line: 5, Name: "work_mem", Value: "4MB", Text: "work_mem 4MB"},
			}, ""},
		{"quotes", `a = 'it''s'` + "\n" + `b = 'back\'slash # not a comment'` + "\n",
			[]entry{
				{Line: 1, Name: "a", Value: "it's", Text: `a = 'it''s'`},
				{Line: 2, Name: "b", Value: "back'slash # not a comment", Text: `b = 'back\'slash # not a comment'`},
			}, ""},
		{"names fold case, dotted names", "Shared_Buffers = 1GB\nauto_explain.log_min_duration = 5s\n",
			[]entry{
				{Line: 1, Name: "shared_buffers", Value: "1GB", Text: "Shared_Buffers = 1GB"},
				{Line: 2, Name: "auto_explain.log_min_duration", Value: "5s", Text: "auto_explain.log_min_duration = 5s"},
			}, ""},
		{"include directives", "include_dir = 'conf.d'\ninclude 'x.conf'\n",
			[]entry{
				{Line: 1, Name: "include_dir", Value: "conf.d", Text: "include_dir = 'conf.d'"},
				{Line: 2, Name: "include", Value: "x.conf", Text: "include 'x.conf'"},
			}, ""},
		{"crlf", "a = 1\r\n", []entry{{Line: 1, Name: "a", Value: "1", Text: "a = 1"}}, ""},
		{"unterminated", "a = 'x\n", nil, "f.conf:1: unterminated quoted string"},
		{"garbage after value", "a = 1 2\n", nil, "f.conf:1: syntax error: unexpected text after the value of a"},
		{"bad name", "= 1\n", nil, "f.conf:1: syntax error: expected a setting name"},
		{"missing value", "a =\n", nil, "f.conf:1: missing value"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseConf("f.conf", []byte(tc.in))
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err = %v; want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i := range tc.want {
				tc.want[i].File = "f.conf"
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func fsOf(files map[string]string, dirs map[string][]string) *confFS {
	fs := newConfFS()
	for p, c := range files {
		fs.Files[p] = &confFile{Exists: true, Content: []byte(c), Mode: "600", Owner: "postgres", Group: "postgres"}
	}
	for d, n := range dirs {
		fs.Dirs[d] = n
	}
	return fs
}

func TestWalkConfig(t *testing.T) {
	fs := fsOf(map[string]string{
		"/etc/pg/postgresql.conf":       "shared_buffers = 128MB\ninclude_dir 'conf.d'\ninclude_if_exists '/opt/missing.conf'\ninclude 'extra/late.conf'\n",
		"/etc/pg/conf.d/002-b.conf":     "shared_buffers = 2GB\n",
		"/etc/pg/conf.d/001-a.conf":     "huge_pages = try\n",
		"/etc/pg/extra/late.conf":       "work_mem = 8MB\n",
		"/data/postgresql.auto.conf":    "# Do not edit\nshared_buffers = '1GB'\n",
		"/opt/missing.conf":             "",
		"/etc/pg/conf.d/ignored.conf~":  "x = 1\n",
		"/etc/pg/conf.d/.hidden.conf":   "x = 1\n",
		"/etc/pg/conf.d/not-a-conf.txt": "x = 1\n",
	}, map[string][]string{"/etc/pg/conf.d": {"002-b.conf", "001-a.conf"}})
	fs.Files["/opt/missing.conf"] = &confFile{} // include_if_exists: fine
	w, err := walkConfig(fs, "/etc/pg/postgresql.conf", "/data/postgresql.auto.conf")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range w.Entries {
		got = append(got, e.where()+" "+e.Name+"="+e.Value)
	}
	want := []string{
		"/etc/pg/postgresql.conf:1 shared_buffers=128MB",
		"/etc/pg/conf.d/001-a.conf:1 huge_pages=try",
		"/etc/pg/conf.d/002-b.conf:1 shared_buffers=2GB",
		"/etc/pg/extra/late.conf:1 work_mem=8MB",
		"/data/postgresql.auto.conf:2 shared_buffers=1GB",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("entries\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if e, _ := w.last("shared_buffers"); e.File != "/data/postgresql.auto.conf" {
		t.Errorf("winner %s", e.where())
	}
	if len(w.Missing) != 0 {
		t.Errorf("missing %v", w.Missing)
	}
}

func TestWalkConfigErrorsAndMissing(t *testing.T) {
	tests := []struct {
		name        string
		files       map[string]string
		dirs        map[string][]string
		absent      []string
		wantMissing []string
		wantErr     string
	}{
		{"unread include and dir are requested", map[string]string{"/c/postgresql.conf": "include 'a.conf'\ninclude_dir '/x/d'\n"}, nil, nil,
			[]string{"f:/c/a.conf", "d:/x/d", "f:/data/postgresql.auto.conf"}, ""},
		{"missing include is an error", map[string]string{"/c/postgresql.conf": "include 'a.conf'\n"}, nil, []string{"/c/a.conf"},
			nil, "/c/postgresql.conf:1: configuration file /c/a.conf does not exist"},
		{"missing include_dir is an error", map[string]string{"/c/postgresql.conf": "\ninclude_dir 'd'\n"}, map[string][]string{"/c/d": nil}, nil,
			nil, "/c/postgresql.conf:2: include_dir /c/d does not exist"},
		{"include loop", map[string]string{"/c/postgresql.conf": "include 'postgresql.conf'\n"}, nil, nil,
			nil, "includes nested deeper than 10 levels"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs := fsOf(tc.files, tc.dirs)
			for _, a := range tc.absent {
				fs.Files[a] = &confFile{}
			}
			w, err := walkConfig(fs, "/c/postgresql.conf", "/data/postgresql.auto.conf")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v; want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(w.Missing, tc.wantMissing) {
				t.Fatalf("missing %v; want %v", w.Missing, tc.wantMissing)
			}
		})
	}
}

func TestFindOverrides(t *testing.T) {
	const dropin = "/d/conf.d/002-hugepages.conf"
	fs := fsOf(map[string]string{
		"/d/postgresql.conf":           "shared_buffers = 128MB\nhuge_pages = try\ninclude_dir 'conf.d'\nhuge_page_size = 0\n",
		dropin:                         string(dropinContent(100 << 20)),
		"/d/conf.d/001-early.conf":     "shared_buffers = 4GB\n",
		"/d/conf.d/003-late.conf":      "huge_pages = on\nhuge_page_size = 1GB\n",
		"/d/postgresql.auto.conf":      "shared_buffers = '1GB'\nhuge_pages = 'true'\n",
		"/d/conf.d/004-unrelated.conf": "work_mem = 1GB\n",
	}, map[string][]string{"/d/conf.d": {"001-early.conf", "002-hugepages.conf", "003-late.conf", "004-unrelated.conf"}})
	w, err := walkConfig(fs, "/d/postgresql.conf", "/d/postgresql.auto.conf")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range findOverrides(w, dropin) {
		got = append(got, o.String())
	}
	// Earlier files lose to the drop-in; later ones with the same value
	// (huge_pages = on / 'true', huge_page_size = 0) change nothing.
	want := []string{
		"/d/conf.d/003-late.conf:2 sets huge_page_size = 1GB",
		"/d/postgresql.auto.conf:1 sets shared_buffers = '1GB'",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
}

func TestCommandLineOverrides(t *testing.T) {
	opts := `/usr/lib/postgresql/15/bin/postgres "-D" "/srv/pg" "-p" "5433" "-B" "4096" "-c" "huge_pages=off" "--huge-page-size=1GB" "-c" "work_mem=1GB"` + "\n"
	f := &confFile{Exists: true, Content: []byte(opts)}
	var got []string
	for _, o := range commandLineOverrides(f, "/srv/pg/postmaster.opts", true) {
		if o.Fixable {
			t.Errorf("%s: command line marked fixable", o)
		}
		got = append(got, o.Entry.Name+"="+o.Entry.Value)
	}
	want := []string{"shared_buffers=4096", "huge_pages=off", "huge_page_size=1GB"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q; want %q", got, want)
	}
	if o := commandLineOverrides(f, "x", false); o != nil {
		t.Errorf("stopped server: opts of the last start do not bind the next: %v", o)
	}
	if got := splitOpts(`/bin/postgres "-D" "/a b" "-k" ""`); !reflect.DeepEqual(got, []string{"/bin/postgres", "-D", "/a b", "-k", ""}) {
		t.Errorf("splitOpts: %q", got)
	}
}

func TestSizes(t *testing.T) {
	parse := []struct {
		in   string
		unit int64
		want int64
	}{
		{"128MB", 8192, 128 << 20}, {"16384", 8192, 128 << 20}, {"115712kB", 8192, 115712 << 10},
		{"1GB", 1024, 1 << 30}, {"0", 1024, 0}, {"2TB", 1, 2 << 40}, {"8192B", 1, 8192},
	}
	for _, tc := range parse {
		if got, err := parseSize(tc.in, tc.unit); err != nil || got != tc.want {
			t.Errorf("parseSize(%q, %d) = %d, %v; want %d", tc.in, tc.unit, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "MB", "1.5GB", "lots"} {
		if _, err := parseSize(bad, 1); err == nil {
			t.Errorf("parseSize(%q) accepted", bad)
		}
	}
	format := map[int64]string{0: "0", 128 << 20: "128MB", 115712 << 10: "113MB", 115720 << 10: "115720kB", 6 << 30: "6GB", 1 << 40: "1TB", 1000: "1000B"}
	for in, want := range format {
		if got := formatSize(in); got != want {
			t.Errorf("formatSize(%d) = %q; want %q", in, got, want)
		}
	}
	same := []struct {
		name, a, b string
		want       bool
	}{
		{"shared_buffers", "16384", "128MB", true}, {"shared_buffers", "1GB", "128MB", false},
		{"huge_pages", "'true'", "on", false}, // quotes are the parser's job
		{"huge_pages", "true", "on", true}, {"huge_pages", "ON", "on", true}, {"huge_pages", "try", "on", false},
		{"huge_page_size", "0", "0kB", true}, {"huge_page_size", "2MB", "2048", true}, {"huge_page_size", "1GB", "0", false},
	}
	for _, tc := range same {
		if got := sameSetting(tc.name, tc.a, tc.b); got != tc.want {
			t.Errorf("sameSetting(%s, %q, %q) = %v", tc.name, tc.a, tc.b, got)
		}
	}
}

func TestRewriteIncludesForScratch(t *testing.T) {
	in := "include_dir = '/etc/postgresql/15/main/conf.d'\t# absolute\ninclude 'rel.conf'\ninclude_if_exists '/opt/pg/extra.conf'\nshared_buffers = 1GB\n"
	got, err := rewriteIncludes("/etc/postgresql/15/main/postgresql.conf", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := "include_dir = 'conf.d'\ninclude 'rel.conf'\ninclude_if_exists = '../../../../opt/pg/extra.conf'\nshared_buffers = 1GB\n"
	if string(got) != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	for _, tc := range [][3]string{{"/a/b", "/a/b/c", "c"}, {"/a/b", "/a/x", "../x"}, {"/", "/etc/x", "etc/x"}, {"/a", "/a", "."}} {
		if got := relPath(tc[0], tc[1]); got != tc[2] {
			t.Errorf("relPath(%s, %s) = %s; want %s", tc[0], tc[1], got, tc[2])
		}
	}
}

func TestCommentOutAndAppend(t *testing.T) {
	got, err := commentOut([]byte("a = 1\nshared_buffers = '1GB'\n"), 2, "disabled by pgtune: it overrode conf.d/002-hugepages.conf")
	if err != nil {
		t.Fatal(err)
	}
	if want := "a = 1\n#shared_buffers = '1GB'\t# disabled by pgtune: it overrode conf.d/002-hugepages.conf\n"; string(got) != want {
		t.Errorf("commentOut: %q", got)
	}
	entries, _ := parseConf("x", got)
	if len(entries) != 1 {
		t.Errorf("commented line still parsed as a setting: %+v", entries)
	}
	if _, err := commentOut([]byte("a\n"), 5, ""); err == nil {
		t.Error("line out of range accepted")
	}
	if got := appendLine([]byte("no newline at end"), "x = 1"); string(got) != "no newline at end\nx = 1\n" {
		t.Errorf("appendLine: %q", got)
	}
	if got := appendLine(nil, "x = 1"); string(got) != "x = 1\n" {
		t.Errorf("appendLine on empty: %q", got)
	}
}

func TestIncludeDirective(t *testing.T) {
	tests := [][3]string{
		{"/var/lib/pg/data", "/var/lib/pg/data/conf.d/002-hugepages.conf", "include_dir = 'conf.d'\t# added by pgtune"},
		{"/etc/postgresql/15/main", "/etc/postgresql/15/main/pgtune.conf", "include 'pgtune.conf'\t# added by pgtune"},
		{"/etc/pg", "/srv/pgtune/hp.conf", "include_dir = '/srv/pgtune'\t# added by pgtune"},
	}
	for _, tc := range tests {
		if got := includeDirective(tc[0], tc[1]); got != tc[2] {
			t.Errorf("includeDirective(%s, %s) = %q; want %q", tc[0], tc[1], got, tc[2])
		}
	}
}

func TestCheckDropin(t *testing.T) {
	for _, ok := range []string{"conf.d/002-hugepages.conf", "/etc/pg/x.conf", "pgtune.conf"} {
		if err := checkDropin(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "conf.d/x.txt", "conf.d/.x.conf", "a'b.conf", "a\nb.conf", `a\b.conf`} {
		if err := checkDropin(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// The rendered drop-in and the include diff on a plain initdb
// postgresql.conf tail, as check shows them.
func TestGoldenDropinAndIncludeDiff(t *testing.T) {
	golden(t, "dropin.golden", string(dropinContent(115712<<10)))
	conf := "#------------------------------------------------------------------------------\n" +
		"# CONFIG FILE INCLUDES\n" +
		"#------------------------------------------------------------------------------\n\n" +
		"# These options allow settings to be loaded from files other than the\n" +
		"# default postgresql.conf.  Note that these are applied at the time of\n" +
		"# the include directive, not at the end of the file.\n\n" +
		"#include_dir = '...'\t\t\t# include files ending in '.conf' from\n" +
		"\t\t\t\t\t# a directory, e.g., 'conf.d'\n" +
		"#include_if_exists = '...'\t\t# include file only if it exists\n" +
		"#include = '...'\t\t\t# include file\n\n\n" +
		"#------------------------------------------------------------------------------\n" +
		"# CUSTOMIZED OPTIONS\n" +
		"#------------------------------------------------------------------------------\n\n" +
		"# Add settings for extensions here\n"
	after := appendLine([]byte(conf), includeDirective("/var/lib/postgresql/data", "/var/lib/postgresql/data/conf.d/002-hugepages.conf"))
	golden(t, "include.diff.golden", udiff.Unified("a/var/lib/postgresql/data/postgresql.conf", "b/var/lib/postgresql/data/postgresql.conf", conf, string(after)))
	golden(t, "dropin.diff.golden", udiff.Unified("a/var/lib/postgresql/data/conf.d/002-hugepages.conf", "b/var/lib/postgresql/data/conf.d/002-hugepages.conf",
		string(dropinContent(128<<20)), string(dropinContent(115712<<10))))
}
