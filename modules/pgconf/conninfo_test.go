package pgconf

import (
	"context"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/transport"
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

// TestConninfoControlCharacters: a control character in a member's
// primary_conninfo is refused (it would be written into another member's
// configuration file, where a line break ends the line); the reason names
// the keyword, never the value. Line breaks between pairs are only space.
func TestConninfoControlCharacters(t *testing.T) {
	const secret = "s3cr3t"
	for _, tc := range []struct {
		name, in, err string // err "" when accepted
	}{
		{"a line break in a quoted password", "host=db1 password='" + secret + "\nx'", "the value of password holds a control character"},
		{"a carriage return", "host=db1 application_name='" + secret + "\r'", "the value of application_name holds"},
		{"an escaped line break, unquoted", "host=db1 user=" + secret + "\\\nx", "the value of user holds"},
		{"a tab in quotes", "host=db1 password='" + secret + "\tx'", "the value of password holds"},
		{"DEL", "host=db1 password=" + secret + "\x7f", "the value of password holds"},
		{"in a keyword", "host=db1 pass\x01word=" + secret, "a keyword holding a control character"},
		{"line breaks between pairs", "host=db1\n\tuser=rep\r\npassword=" + secret + "\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseConninfo(tc.in)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("parseConninfo = %v; want an error with %q", err, tc.err)
			case err != nil && strings.Contains(err.Error(), secret):
				t.Errorf("the reason shows the value: %v", err)
			}
		})
	}
	// As a standby's settings are read (its callers name the host).
	out := "recovery=true\nconninfo=" + hex.EncodeToString([]byte("host=db1 password='"+secret+"\n'")) + "\n"
	tg := &engine.Target{Name: "db2", Transport: cannedTransport{res: transport.Result{Stdout: []byte(out)}},
		Facts: &facts.Facts{Postgres: &facts.Postgres{Running: true, Owner: "postgres", Port: 5432}}}
	if _, _, err := readMember(context.Background(), tg); err == nil || !strings.Contains(err.Error(), "the value of password holds") || strings.Contains(err.Error(), secret) {
		t.Errorf("readMember: %v", err)
	}
	pairs, err := parseConninfo("host=db1 user=rep")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := repointLine(pairs, "/run/pg\nlisten_addresses = '*'", 5432); err == nil || !strings.Contains(err.Error(), "the value of host holds a control character") {
		t.Errorf("repointLine with a line break in host: %v", err)
	}
	if got, err := repointLine(pairs, "/run/pg", 5432); err != nil || got != "primary_conninfo = 'host=/run/pg port=5432 user=rep'" {
		t.Errorf("repointLine = %q, %v", got, err)
	}
}
