package mask

import (
	"strings"
	"testing"
)

// TestH104Leaks (review h104): credentials in restore/archive commands
// that Text still shows.
func TestH104Leaks(t *testing.T) {
	for _, s := range []string{
		`restore_command = 'curl -fsS https://u:p#ss@h/wal/%f -o %p'`, // unencoded # in a URI password
		`primary_conninfo = 'postgresql://rep:p?ss@h/db'`,             // unencoded ?
		`archive_command = 'curl -T %p -H "Authorization: Bearer S3cr" https://h/%f'`,
		`archive_command = 'curl -T %p --oauth2-bearer S3cr https://h/%f'`,
		`archive_command = 'curl --proxy-user u:S3cr -T %p ftp://h/%f'`,
		`archive_command = 'curl -U u:S3cr -x p -T %p ftp://h/%f'`,
		`archive_command = 'curl -T %p "https://h/%f?X-Amz-Signature=S3cr"'`,
		`archive_command = 'lftp -u u,S3cr -e "put %p" h'`,
		`archive_command = 'smbclient //h/s -U u%S3cr -c "put %p"'`,
		`primary_conninfo = 'host=h user=rep password = ''S3 cr'' port=5432'`, // through Text, not ConfigLine
	} {
		if got := Text(s); strings.Contains(got, "S3cr") || strings.Contains(got, "p#ss") || strings.Contains(got, "p?ss") || strings.Contains(got, " cr''") {
			t.Errorf("leaks:\n in  %s\n out %s", s, got)
		}
	}
}

// TestH104Overmasking (review h104): useful output destroyed.
func TestH104Overmasking(t *testing.T) {
	for _, s := range []string{
		`password_encryption = scram-sha-256`,
		`ssl_passphrase_command_supports_reload = on`,
		`the setting password_encryption: scram-sha-256 was kept`,
		`ps -u postgres:postgres`,
	} {
		if got := Text(s); got != s {
			t.Errorf("masked what is no secret:\n in  %s\n out %s", s, got)
		}
	}
}
