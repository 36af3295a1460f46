package mask

import (
	"strings"
	"testing"
)

// TestTextCommandCredentials: credentials in restore/archive commands and
// inventory commands that used to reach output (review h104), and values
// around them that must stay visible.
func TestTextCommandCredentials(t *testing.T) {
	tests := []textCase{
		{"uri password with #", "curl -fsS https://u:p#ss@h/wal/%f -o %p", "curl -fsS https://u:(sensitive)@h/wal/%f -o %p"},
		{"uri password with ?", "postgresql://rep:p?ss@h/db", "postgresql://rep:(sensitive)@h/db"},
		{"uri password with @", "postgresql://rep:p@ss@h/db", "postgresql://rep:(sensitive)@h/db"},
		{"uri without password kept", "https://h:8443/wal/%f?x=1#y", "https://h:8443/wal/%f?x=1#y"},
		{"bearer header", `curl -H "Authorization: Bearer S3cr" https://h/%f`, `curl -H "Authorization: Bearer (sensitive)" https://h/%f`},
		{"basic header single quotes", `curl -H 'authorization: Basic dTpTM2Ny' https://h`, `curl -H 'authorization: Basic (sensitive)' https://h`},
		{"proxy header", `curl -H "Proxy-Authorization: Basic dTpTM2Ny" https://h`, `curl -H "Proxy-Authorization: Basic (sensitive)" https://h`},
		{"header without scheme", `curl -H "Authorization:S3cr" https://h`, `curl -H "Authorization:(sensitive)" https://h`},
		{"api key header", `curl -H "X-Api-Key: S3cr" https://h`, `curl -H "X-Api-Key: (sensitive)" https://h`},
		{"token header, doubled quotes", `curl -H ''Private-Token: S3 cr'' h`, `curl -H ''Private-Token: (sensitive)'' h`},
		{"other header kept", `curl -H "Content-Type: text/plain" h`, `curl -H "Content-Type: text/plain" h`},
		{"oauth2 bearer", "curl -T %p --oauth2-bearer S3cr https://h/%f", "curl -T %p --oauth2-bearer (sensitive) https://h/%f"},
		{"proxy-user", "curl --proxy-user u:S3cr -T %p ftp://h/%f", "curl --proxy-user u:(sensitive) -T %p ftp://h/%f"},
		{"proxy -U", "curl -U u:S3cr -x p -T %p ftp://h/%f", "curl -U u:(sensitive) -x p -T %p ftp://h/%f"},
		{"amz signature", `curl -T %p "https://h/%f?X-Amz-Credential=AKIA&X-Amz-Signature=S3cr"`, `curl -T %p "https://h/%f?X-Amz-Credential=(sensitive)&X-Amz-Signature=(sensitive)"`},
		{"amz security token", "https://h/o?X-Amz-Security-Token=S3cr&X-Amz-Expires=60", "https://h/o?X-Amz-Security-Token=(sensitive)&X-Amz-Expires=60"},
		{"azure sas", "https://a.blob.core.windows.net/c/%f?sv=2022&sig=S3cr%3D", "https://a.blob.core.windows.net/c/%f?sv=2022&sig=(sensitive)"},
		{"lftp", `lftp -u u,S3cr -e "put %p" h`, `lftp -u u,(sensitive) -e "put %p" h`},
		{"lftp quoted", `lftp -u 'u,S3cr' h`, `lftp -u 'u,(sensitive)' h`},
		{"smbclient", `smbclient //h/s -U u%S3cr -c "put %p"`, `smbclient //h/s -U u%(sensitive) -c "put %p"`},
		{"doubled quotes in a conninfo", "host=h user=rep password = ''S3 cr'' port=5432", "host=h user=rep password = (sensitive) port=5432"},
		{"escaped quotes in a conninfo", `host=h password=\'S3 cr\' port=5432`, "host=h password=(sensitive) port=5432"},
		{"empty doubled quotes", "password='' port=5432", "password=(sensitive) port=5432"},

		{"password_encryption", "password_encryption = scram-sha-256", "password_encryption = scram-sha-256"},
		{"supports_reload", "ssl_passphrase_command_supports_reload = on", "ssl_passphrase_command_supports_reload = on"},
		{"free text colon", "the setting password_encryption: scram-sha-256 was kept", "the setting password_encryption: scram-sha-256 was kept"},
		{"option form", "-c password_encryption=md5", "-c password_encryption=md5"},
		{"ps user:group", "ps -u postgres:postgres", "ps -u postgres:postgres"},
		{"docker exec user:group", "docker exec -u postgres:postgres pg pg_ctl restart", "docker exec -u postgres:postgres pg pg_ctl restart"},
		{"curl after docker exec", "docker exec pg curl -u u:S3cr h", "docker exec pg curl -u u:(sensitive) h"},
		{"psql -U", "psql -U postgres -p 5432 -h h", "psql -U postgres -p 5432 -h h"},
		{"sudo -u", "sudo -u postgres pg_ctl -o \"-p 5432\" restart", "sudo -u postgres pg_ctl -o \"-p 5432\" restart"},
		{"port key", "port: 5432", "port: 5432"},
		{"key file path", "ssl_key_file = '/etc/ssl/private/server.key'", "ssl_key_file = '/etc/ssl/private/server.key'"},
		{"keytab path", "krb_server_keyfile = 'FILE:/etc/krb5.keytab'", "krb_server_keyfile = 'FILE:/etc/krb5.keytab'"},
	}
	checkTexts(t, tests)
}

// TestSecretsFromCommands: what Text hides is reported, so pgtune hides
// it wherever else it shows up.
func TestSecretsFromCommands(t *testing.T) {
	for _, tc := range []struct{ in, secret string }{
		{`curl -H "Authorization: Bearer S3cr" h`, "S3cr"},
		{"lftp -u u,S3cr h", "S3cr"},
		{"smbclient //h/s -U u%S3cr", "S3cr"},
		{"host=h password=''S3 cr''", "S3 cr"},
	} {
		if got := Secrets(tc.in); !strings.Contains(strings.Join(got, "\n"), tc.secret) {
			t.Errorf("Secrets(%q) = %q, want %q among them", tc.in, got, tc.secret)
		}
	}
}
