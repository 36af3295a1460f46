package mask

import (
	"reflect"
	"strings"
	"testing"
)

func TestText(t *testing.T) {
	tests := []textCase{
		{"nothing", "shared_buffers=128MB huge_pages=on", "shared_buffers=128MB huge_pages=on"},
		{"conninfo", "host=x user=r password=s3cr3t port=5432", "host=x user=r password=(sensitive) port=5432"},
		{"conninfo spaced", "host=x password = s3cr3t dbname=d", "host=x password = (sensitive) dbname=d"},
		{"conninfo quoted", `host=x password='s3 cr\'3t' dbname=d`, "host=x password=(sensitive) dbname=d"},
		{"conninfo unterminated quote", `password='s3cr3t dbname=d`, "password=(sensitive)"},
		{"sslpassword", "sslpassword=k3y sslmode=verify-full", "sslpassword=(sensitive) sslmode=verify-full"},
		{"uri", "postgresql://rep:s3cr3t@db1:5432/postgres?sslmode=require", "postgresql://rep:(sensitive)@db1:5432/postgres?sslmode=require"},
		{"uri at in password", "postgres://rep:s3@cr3t@db1/x", "postgres://rep:(sensitive)@db1/x"},
		{"uri no password", "postgresql://rep@db1/x", "postgresql://rep@db1/x"},
		{"uri query password", "postgresql://db1/x?user=r&password=s3cr3t&sslmode=require", "postgresql://db1/x?user=r&password=(sensitive)&sslmode=require"},
		{"s3 uri", "aws s3 cp %p s3://AKIA:wJalr/XY@bucket/wal/%f", "aws s3 cp %p s3://AKIA:(sensitive)@bucket/wal/%f"},
		{"env", "PGPASSWORD=s3cr3t pg_ctlcluster 15 main restart", "PGPASSWORD=(sensitive) pg_ctlcluster 15 main restart"},
		{"env double quoted", `PGPASSWORD="s3 cr\"3t" pg_ctl restart`, "PGPASSWORD=(sensitive) pg_ctl restart"},
		{"env single quoted", `env PGPASSWORD='s3 cr3t' psql`, "env PGPASSWORD=(sensitive) psql"},
		{"aws", "AWS_ACCESS_KEY_ID=AKIA AWS_SECRET_ACCESS_KEY=wJalr/XY aws s3 cp %p s3://b/%f",
			"AWS_ACCESS_KEY_ID=AKIA AWS_SECRET_ACCESS_KEY=(sensitive) aws s3 cp %p s3://b/%f"},
		{"session token", "AWS_SESSION_TOKEN=abc wal-g wal-push %p", "AWS_SESSION_TOKEN=(sensitive) wal-g wal-push %p"},
		{"option equals", "pgbackrest --repo1-cipher-pass=s3cr3t archive-push %p", "pgbackrest --repo1-cipher-pass=(sensitive) archive-push %p"},
		{"option spaced", "tool --password s3cr3t --other x", "tool --password (sensitive) --other x"},
		{"flag without value", "pg_basebackup --password -D /x", "pg_basebackup --password -D /x"},
		{"curl user", "curl -u wal:s3cr3t -T %p https://h/%f", "curl -u wal:(sensitive) -T %p https://h/%f"},
		// Quoted user:password (audit h98): masked to the closing quote.
		{"curl user single quoted", "curl -u 'admin:pa$$w0rd' -X POST https://h/restart", "curl -u 'admin:(sensitive)' -X POST https://h/restart"},
		{"curl user double quoted", `curl -u "u:pw with space" https://h/%f`, `curl -u "u:(sensitive)" https://h/%f`},
		{"curl user double quoted escape", `curl -u "u:p\"w" https://h/%f`, `curl -u "u:(sensitive)" https://h/%f`},
		{"curl user doubled quotes", "restore_command = 'curl -u ''walfetch:S3cr3tPw'' https://h/%f -o %p'", "restore_command = 'curl -u ''walfetch:(sensitive)'' https://h/%f -o %p'"},
		{"curl user backslash quotes", `restore_command = 'curl -u \'walfetch:S3cr3tPw\' https://h/%f'`, `restore_command = 'curl -u \'walfetch:(sensitive)\' https://h/%f'`},
		{"curl --user= quoted", "curl --user='wal:s3 cr3t' -T %p", "curl --user='wal:(sensitive)' -T %p"},
		{"curl user unterminated quote", "curl -u 'wal:s3cr3t -T %p", "curl -u 'wal:(sensitive)"},
		{"curl user quoted password part", `curl -u wal:"s3 cr3t" -T %p`, "curl -u wal:(sensitive) -T %p"},
		{"curl user without password", "curl -u 'wal' -T %p", "curl -u 'wal' -T %p"},
		{"curl user in an option cluster", "curl -fsSu walarch:CURLPW1 -T %p https://h/%f", "curl -fsSu walarch:(sensitive) -T %p https://h/%f"},
		{"curl proxy user in an option cluster", "curl -kU px:PXPW -T %p https://h/%f", "curl -kU px:(sensitive) -T %p https://h/%f"},
		{"sudo user is no credential", "sudo -u postgres pg_ctl restart", "sudo -u postgres pg_ctl restart"},
		{"ncat proxy auth", "ncat --proxy proxy:3128 --proxy-auth walker:CFGPW1 %h %p", "ncat --proxy proxy:3128 --proxy-auth (sensitive) %h %p"},
		{"ncat proxy auth equals", "ncat --proxy-auth=walker:CFGPW1 %h %p", "ncat --proxy-auth=(sensitive) %h %p"},
		{"socat proxyauth", "socat - PROXY:px:%h:%p,proxyauth=walker:SOPW1", "socat - PROXY:px:%h:%p,proxyauth=(sensitive)"},
		{"openssl pass", "openssl enc -d -aes-256-cbc -pass pass:OSSLPW1 -in /w/%f -out %p", "openssl enc -d -aes-256-cbc -pass pass:(sensitive) -in /w/%f -out %p"},
		{"openssl passin", "openssl rsa -passin pass:'a b' -in k", "openssl rsa -passin pass:(sensitive) -in k"},
		{"openssl pass from env", "openssl enc -pass env:WALPW -in x", "openssl enc -pass env:WALPW -in x"},
		{"openssl k", "openssl enc -d -aes256 -k OSSLPW2 -in /w/%f", "openssl enc -d -aes256 -k (sensitive) -in /w/%f"},
		{"curl k takes no value", "curl -k -T %p https://h/%f", "curl -k -T %p https://h/%f"},
		{"curl user quote continued", "curl -u 'admin:pa''ss' https://h/%f", "curl -u 'admin:(sensitive)' https://h/%f"},
		{"curl user quote then double quote", `curl --user 'admin:abc'"d e f"x -T %p`, "curl --user 'admin:(sensitive)' -T %p"},
		{"curl user unquoted then quoted", `curl -u admin:pa'ss' https://h/%f`, "curl -u admin:(sensitive) https://h/%f"},
		{"shell pwd kept", "PWD=/var/lib cd $PWD", "PWD=/var/lib cd $PWD"},
		// Audit h98: what used to be left after the masked word.
		{"unquoted command to the end of the line", "ssl_passphrase_command=echo s3cr3t", "ssl_passphrase_command=(sensitive)"},
		{"unquoted command spaced", "failed: ssl_passphrase_command = /bin/echo s3cr3t  ", "failed: ssl_passphrase_command = (sensitive)  "},
		{"quoted command", "ssl_passphrase_command='echo s3cr3t' other", "ssl_passphrase_command=(sensitive) other"},
		{"sshpass", "sshpass -p s3cr3t ssh db1 true", "sshpass -p (sensitive) ssh db1 true"},
		{"sshpass attached, after options", "sshpass -v -P assword -ps3cr3t ssh -p 2222 db1", "sshpass -v -P assword -p(sensitive) ssh -p 2222 db1"},
		{"sshpass from a file kept", "sshpass -f /etc/pw ssh -p 2222 db1", "sshpass -f /etc/pw ssh -p 2222 db1"},
		{"mysql -p", "mysql -ps3cr3t -u root -e 'select 1'", "mysql -p(sensitive) -u root -e 'select 1'"},
		{"mysqldump -p quoted", "/usr/bin/mysqldump -h x -P 3306 -p's3 cr3t' db", "/usr/bin/mysqldump -h x -P 3306 -p(sensitive) db"},
		{"mysql bare -p kept", "mysql -p -u root", "mysql -p -u root"},
		{"yaml flow map", "{user: rep, password: s3cr3t}", "{user: rep, password: (sensitive)}"},
		{"yaml flow map, more after", "{user: rep, password: s3cr3t, sslmode: require}", "{user: rep, password: (sensitive), sslmode: require}"},
		{"json", `{"user":"rep","password":"s3 \"cr3t","x":1}`, `{"user":"rep","password":(sensitive),"x":1}`},
		{"yaml double quoted", `  password: "s3 cr3t"`, "  password: (sensitive)"},
		{"yaml single quoted", `password: 's3 cr''3t' # ops`, "password: (sensitive) # ops"},
		{"yaml plain with a comma", "password: s3, cr3t # ops", "password: (sensitive) # ops"},
		{"yaml plain", "superuser password: s3cr3t", "superuser password: (sensitive)"},
		{"postgres message kept", `FATAL:  password authentication failed for user "x"`, `FATAL:  password authentication failed for user "x"`},
		{"multi line", "a password=x\nb PGPASSWORD=y z", "a password=(sensitive)\nb PGPASSWORD=(sensitive) z"},
		{"inner quote nested", "opts='PGPASSWORD=x' cmd", "opts='PGPASSWORD=(sensitive)"},
		{"error with command", "sh -c 'export LC_ALL=C …' sh 'PGPASSWORD=hunter2 systemctl restart pg' /data: exit status 1",
			"sh -c 'export LC_ALL=C …' sh 'PGPASSWORD=(sensitive) systemctl restart pg' /data: exit status 1"},
	}
	checkTexts(t, tests)
}

// textCase is one input of Text and what it must give.
type textCase struct{ name, in, want string }

// checkTexts runs Text on each case, and again on its result: masking
// what is masked already changes nothing.
func checkTexts(t *testing.T, tests []textCase) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Text(tc.in)
			if got != tc.want {
				t.Errorf("Text(%q)\n got %q\nwant %q", tc.in, got, tc.want)
			}
			if again := Text(got); again != got {
				t.Errorf("not idempotent: %q → %q", got, again)
			}
		})
	}
}

func TestConfigLine(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"plain kept byte for byte", "shared_buffers = 128MB\t# min 128kB", "shared_buffers = 128MB\t# min 128kB"},
		{"primary_conninfo", "primary_conninfo = 'host=x user=r password=s3cr3t'", "primary_conninfo = 'host=x user=r password=(sensitive)'"},
		{"primary_conninfo no equals", "primary_conninfo 'host=x password=s3cr3t application_name=a'", "primary_conninfo 'host=x password=(sensitive) application_name=a'"},
		{"conninfo with doubled quotes", "primary_conninfo = 'host=x password=''s3 cr3t'' port=5433'", "primary_conninfo = 'host=x password=(sensitive) port=5433'"},
		{"conninfo with backslash quote", `primary_conninfo = 'password=s3\'cr3t host=x'`, "primary_conninfo = 'password=(sensitive) host=x'"},
		{"conninfo uri", "primary_conninfo = 'postgresql://rep:s3cr3t@db1/postgres'", "primary_conninfo = 'postgresql://rep:(sensitive)@db1/postgres'"},
		{"commented out", "#primary_conninfo = 'password=s3cr3t'\t\t# connection string", "#primary_conninfo = 'password=(sensitive)'\t\t# connection string"},
		{"ssl_passphrase_command", "ssl_passphrase_command = 'echo s3cr3t'", "ssl_passphrase_command = '(sensitive)'"},
		{"ssl_passphrase_command unquoted", "ssl_passphrase_command = echo s3cr3t", "ssl_passphrase_command = '(sensitive)'"},
		{"ssl_passphrase_command unquoted, hash", "ssl_passphrase_command = echo s3#cr3t", "ssl_passphrase_command = '(sensitive)'"},
		{"password setting unquoted", "myext.password = s3cr3t # set by ops", "myext.password = '(sensitive)' # set by ops"},
		{"password_encryption is no secret", "password_encryption = 'scram-sha-256'", "password_encryption = 'scram-sha-256'"},
		{"supports_reload is no secret", "ssl_passphrase_command_supports_reload = on", "ssl_passphrase_command_supports_reload = on"},
		{"archive_command env", "archive_command = 'PGPASSWORD=s3cr3t pg_receivewal -h h %p'", "archive_command = 'PGPASSWORD=(sensitive) pg_receivewal -h h %p'"},
		{"archive_command shell quotes", "archive_command = 'env AWS_SECRET_ACCESS_KEY=''a b'' aws s3 cp %p s3://b/%f'",
			"archive_command = 'env AWS_SECRET_ACCESS_KEY=(sensitive) aws s3 cp %p s3://b/%f'"},
		{"restore_command uri", "restore_command = 'curl -fsS https://wal:s3cr3t@h/%f -o %p'", "restore_command = 'curl -fsS https://wal:(sensitive)@h/%f -o %p'"},
		{"restore_command curl quoted user", "restore_command = 'curl -u ''walfetch:s3cr3t'' https://h/%f -o %p'", "restore_command = 'curl -u ''walfetch:(sensitive)'' https://h/%f -o %p'"},
		{"archive_command curl double quoted user", `archive_command = 'curl -u "wal:s3cr3t" -T %p https://h/%f'`, `archive_command = 'curl -u "wal:(sensitive)" -T %p https://h/%f'`},
		{"restore_command option", "restore_command = 'wal-g wal-fetch %f %p --password=s3cr3t' # comment", "restore_command = 'wal-g wal-fetch %f %p --password=(sensitive)' # comment"},
		{"masked value requoted", "archive_command = 'x=''q'' PGPASSWORD=s && test ''a'' = a'", "archive_command = 'x=''q'' PGPASSWORD=(sensitive) && test ''a'' = a'"},
		{"hash inside quotes", "primary_conninfo = 'password=s3#cr3t host=x' # note", "primary_conninfo = 'password=(sensitive) host=x' # note"},
		{"comment line", "# the replication password=s3cr3t lives here", "# the replication password=(sensitive) lives here"},
		{"include", "include_dir = 'conf.d'", "include_dir = 'conf.d'"},
		{"sysctl line", "vm.nr_hugepages = 3013", "vm.nr_hugepages = 3013"},
		{"empty", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ConfigLine(tc.in)
			if got != tc.want {
				t.Errorf("ConfigLine(%q)\n got %q\nwant %q", tc.in, got, tc.want)
			}
			if again := ConfigLine(got); again != got {
				t.Errorf("not idempotent: %q → %q", got, again)
			}
			if strings.Contains(got, "s3cr3t") || strings.Contains(got, "s3\\'cr3t") {
				t.Errorf("secret left in %q", got)
			}
		})
	}
}

func TestConfigAndDiff(t *testing.T) {
	after := "# Do not edit this file manually!\nprimary_conninfo = 'host=x user=r password=s3cr3t'\n"
	if got, want := Config(after), "# Do not edit this file manually!\nprimary_conninfo = 'host=x user=r password=(sensitive)'\n"; got != want {
		t.Errorf("Config = %q, want %q", got, want)
	}
	diff := "--- a/data/postgresql.auto.conf\n+++ b/data/postgresql.auto.conf\n@@ -1,3 +1,2 @@\n # Do not edit this file manually!\n" +
		"-primary_conninfo = 'password=old'\n+primary_conninfo = 'password=s3cr3t'\n-shared_buffers = '64MB'\n\\ No newline at end of file\n"
	want := "--- a/data/postgresql.auto.conf\n+++ b/data/postgresql.auto.conf\n@@ -1,3 +1,2 @@\n # Do not edit this file manually!\n" +
		"-primary_conninfo = 'password=(sensitive)'\n+primary_conninfo = 'password=(sensitive)'\n-shared_buffers = '64MB'\n\\ No newline at end of file\n"
	if got := Diff(diff); got != want {
		t.Errorf("Diff =\n%s\nwant\n%s", got, want)
	}
}

func TestSecrets(t *testing.T) {
	got := Secrets(`PGPASSWORD='s3 cr3t' AWS_SECRET_ACCESS_KEY=wJalr PGPORT=5433 systemctl restart postgresql@15-main --token=t0k`)
	want := []string{"'s3 cr3t'", "s3 cr3t", "wJalr", "t0k"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Secrets = %q, want %q", got, want)
	}
	if got, want := Secrets(`curl -u 'admin:pa$$w0rd' -X POST https://ctl/restart`), []string{"pa$$w0rd"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Secrets of a quoted curl user = %q, want %q", got, want)
	}
	for in, want := range map[string][]string{
		`curl -u 'admin:pa''ss' https://ctl/restart`:                   {"pa''ss'", "pass"},
		`curl -u admin:'abc'"d\$f" https://ctl/restart`:                {`'abc'"d\$f"`, "abcd$f"},
		`curl -u "admin:p\"w" https://ctl/restart`:                     {`p\"w`, `p"w`},
		`curl -fsSu admin:RSPW1 -X POST http://127.0.0.1:8008/restart`: {"RSPW1"},
	} {
		if got := Secrets(in); !reflect.DeepEqual(got, want) {
			t.Errorf("Secrets(%s) = %q, want %q", in, got, want)
		}
	}
	if got := Secrets("systemctl restart postgresql"); got != nil {
		t.Errorf("Secrets of a plain command = %q", got)
	}
}

func TestSensitiveName(t *testing.T) {
	for name, want := range map[string]bool{
		"password": true, "PGPASSWORD": true, "sslpassword": true, "ssl_passphrase_command": true, "PGPASS": true,
		"AWS_SECRET_ACCESS_KEY": true, "--private-key": true, "api_token": true, "MYSQL_PWD": true, "GOOGLE_APPLICATION_CREDENTIALS": true,
		"proxyauth": true, "--proxy-auth": true,
		"PWD": false, "host": false, "user": false, "shared_buffers": false, "AWS_ACCESS_KEY_ID": false, "sslkey": false, "primary_conninfo": false,
	} {
		if got := SensitiveName(name); got != want {
			t.Errorf("SensitiveName(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestConfigLineYAML: a YAML file (patroni.yml) shown as a diff keeps its
// passwords hidden, whatever the indent, list dash, quoting or comment.
func TestConfigLineYAML(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"password", "  password: S3cret", "  password: (sensitive)"},
		{"quoted", `    password: 'S3 cret'`, "    password: (sensitive)"},
		{"double quoted with comment", `    password: "S3cret" # rotated`, "    password: (sensitive)"},
		{"list item", "  - password: S3cret", "  - password: (sensitive)"},
		{"commented out", "#    password: S3cret", "#    password: (sensitive)"},
		{"tab after colon", "password:\tS3cret", "password:\t(sensitive)"},
		{"other sensitive names", "  api_token: S3cret", "  api_token: (sensitive)"},
		{"secret", "  secret: S3cret", "  secret: (sensitive)"},
		{"already masked", "  password: (sensitive)", "  password: (sensitive)"},
		{"nested mapping kept", "  superuser:", "  superuser:"},
		{"empty value kept", "  password:", "  password:"},
		{"plain kept byte for byte", "  username: postgres", "  username: postgres"},
		{"address with colon kept", "  connect_address: 10.0.0.1:8008", "  connect_address: 10.0.0.1:8008"},
		{"uri credentials", "  url: postgres://rep:S3cret@db1/x", "  url: postgres://rep:(sensitive)@db1/x"},
		{"conf setting masked as before", "db.password = s3cr3t", "db.password = '(sensitive)'"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ConfigLine(tc.in); got != tc.want {
				t.Errorf("ConfigLine(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
	diff := "--- /etc/patroni.yml\n+++ /etc/patroni.yml\n@@ -1,4 +1,4 @@\n restapi:\n-  password: S3cret\n+  password: 0ld\n   username: admin\n"
	want := "--- /etc/patroni.yml\n+++ /etc/patroni.yml\n@@ -1,4 +1,4 @@\n restapi:\n-  password: (sensitive)\n+  password: (sensitive)\n   username: admin\n"
	if got := Diff(diff); got != want {
		t.Errorf("Diff =\n%s\nwant\n%s", got, want)
	}
}
