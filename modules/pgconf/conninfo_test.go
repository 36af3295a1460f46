package pgconf

import (
	"strings"
	"testing"
)

func TestRepointConninfo(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
		drop           []string
	}{
		{"basebackup -R form", `user=postgres passfile='/var/lib/postgresql/.pgpass' channel_binding=prefer host=10.0.0.1 port=5432 sslmode=prefer application_name=s1`,
			`host=/run/pg port=5434 user=postgres passfile=/var/lib/postgresql/.pgpass channel_binding=prefer sslmode=prefer application_name=s1`, nil},
		{"hostaddr dropped", `hostaddr=10.0.0.1 host=db1 port=5432 user=rep`, `host=/run/pg port=5434 user=rep`, nil},
		{"quoted password kept", `host=db1 port = 5432 user=rep password='a b\'c\\d'`, `host=/run/pg port=5434 user=rep password='a b\'c\\d'`, nil},
		{"no port", `host=db1 user=rep`, `host=/run/pg port=5434 user=rep`, nil},
		{"drop", `host=db1 user=rep application_name=s1`, `host=/run/pg port=5434 user=rep`, []string{"application_name"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pairs, err := parseConninfo(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			got := repoint(pairs, "/run/pg", 5434, tc.drop...)
			if got != tc.want {
				t.Errorf("repoint:\n got %s\nwant %s", got, tc.want)
			}
			again, err := parseConninfo(got)
			if err != nil || repoint(again, "/run/pg", 5434) != got {
				t.Errorf("the rewritten string does not read back the same: %v", err)
			}
		})
	}
}

func TestParseConninfoRefuses(t *testing.T) {
	for _, in := range []string{
		"postgresql://rep:secret@db1:5432/postgres",
		"host=db1 password='secret",
		"host db1",
	} {
		_, err := parseConninfo(in)
		if err == nil {
			t.Errorf("%q: accepted", in)
			continue
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("%q: the reason shows the password: %v", in, err)
		}
	}
}

func TestConfLines(t *testing.T) {
	conf := []byte("# auto\nwork_mem = '4MB'\nprimary_conninfo = 'host=a port=1'\n")
	got, err := replaceConfLine(conf, 3, "primary_conninfo", conninfoLine(`host=b password='x\'y'`))
	if err != nil {
		t.Fatal(err)
	}
	if want := "# auto\nwork_mem = '4MB'\nprimary_conninfo = 'host=b password=''x\\\\''y'''\n"; string(got) != want {
		t.Errorf("replace:\n got %q\nwant %q", got, want)
	}
	if _, err := replaceConfLine(conf, 2, "primary_conninfo", "x"); err == nil {
		t.Error("replaced a line that sets something else")
	}
	if _, err := replaceConfLine(conf, 9, "primary_conninfo", "x"); err == nil {
		t.Error("replaced a line past the end")
	}
	if got := string(appendConfLine([]byte("a = 1"), "b = 2")); got != "a = 1\nb = 2\n" {
		t.Errorf("append: %q", got)
	}
}
