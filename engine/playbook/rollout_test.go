package playbook

import (
	"reflect"
	"testing"
	"time"
)

func TestRolloutKeys(t *testing.T) {
	pct := func(f float64) *float64 { return &f }
	tests := []struct {
		name, yml string
		want      Rollout
	}{
		{"none", "- hosts: all\n  policy: {pgconf: }\n", Rollout{}},
		{"number", "- hosts: all\n  serial: 5\n  policy: {pgconf: }\n",
			Rollout{Serial: []BatchSize{{Count: 5}}, Line: 1}},
		{"percentage", "- hosts: all\n  serial: \"25%\"\n  policy: {pgconf: }\n",
			Rollout{Serial: []BatchSize{{Percent: 25}}, Line: 1}},
		{"canary list", "- hosts: all\n  serial: [1, \"10%\", \"100%\"]\n  max_fail_percentage: 0\n  any_errors_fatal: true\n  pause_between_batches: 30s\n  policy: {pgconf: }\n",
			Rollout{Serial: []BatchSize{{Count: 1}, {Percent: 10}, {Percent: 100}}, MaxFailPercentage: pct(0), AnyErrorsFatal: true,
				PauseBetweenBatches: 30 * time.Second, Line: 1}},
		{"pause in seconds", "- hosts: all\n  pause_between_batches: 2\n  policy: {pgconf: }\n",
			Rollout{PauseBetweenBatches: 2 * time.Second, Line: 1}},
		{"two plays agree", "- hosts: a\n  serial: 2\n  policy: {pgconf: }\n- hosts: b\n  serial: 2\n  policy: {overcommit: }\n",
			Rollout{Serial: []BatchSize{{Count: 2}}, Line: 1}},
		{"Ansible's yes", "- hosts: all\n  any_errors_fatal: yes\n  policy: {pgconf: }\n",
			Rollout{AnyErrorsFatal: true, Line: 1}},
		{"Ansible's no", "- hosts: all\n  any_errors_fatal: \"No\"\n  policy: {pgconf: }\n", Rollout{}},
		{"Ansible's 1", "- hosts: all\n  any_errors_fatal: 1\n  policy: {pgconf: }\n",
			Rollout{AnyErrorsFatal: true, Line: 1}},
		{"null is unset", "- hosts: all\n  serial: null\n  max_fail_percentage:\n  policy: {pgconf: }\n", Rollout{}},
		{"second play sets it", "- hosts: a\n  policy: {pgconf: }\n- hosts: b\n  max_fail_percentage: 12.5\n  policy: {overcommit: }\n",
			Rollout{MaxFailPercentage: pct(12.5), Line: 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pb, err := Parse("p.yml", []byte(tt.yml), testRegistry())
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(pb.Rollout, tt.want) {
				t.Errorf("rollout = %+v, want %+v", pb.Rollout, tt.want)
			}
		})
	}
}

func TestRolloutKeysBad(t *testing.T) {
	tests := []struct{ name, yml, want string }{
		{"zero serial", "- hosts: all\n  serial: 0\n  policy: {pgconf: }\n",
			`p.yml:2:11: serial: "0": a batch size is a whole number of hosts (at least 1) or a percentage such as "25%"`},
		{"percentage over 100", "- hosts: all\n  serial: [1, \"150%\"]\n  policy: {pgconf: }\n",
			`p.yml:2:11: serial: entry 2: "150%": a percentage must be above 0% and at most 100%`},
		{"empty list", "- hosts: all\n  serial: []\n  policy: {pgconf: }\n",
			`p.yml:2:11: serial: an empty list (give a size, a percentage or a list of them)`},
		{"mapping", "- hosts: all\n  serial: {a: 1}\n  policy: {pgconf: }\n",
			`p.yml:2:11: serial: expected a number, a percentage or a list of them, got a mapping`},
		{"budget not a number", "- hosts: all\n  max_fail_percentage: lots\n  policy: {pgconf: }\n",
			`p.yml:2:24: max_fail_percentage: expected a percentage from 0 to 100, got "lots"`},
		{"budget over 100", "- hosts: all\n  max_fail_percentage: 101\n  policy: {pgconf: }\n",
			`p.yml:2:24: max_fail_percentage: "101": expected a percentage from 0 to 100`},
		{"fatal not a bool", "- hosts: all\n  any_errors_fatal: yes please\n  policy: {pgconf: }\n",
			`p.yml:2:21: any_errors_fatal: expected true or false, got "yes please"`},
		{"fatal a number", "- hosts: all\n  any_errors_fatal: 2\n  policy: {pgconf: }\n",
			`p.yml:2:21: any_errors_fatal: expected true or false, got "2"`},
		{"bad pause", "- hosts: all\n  pause_between_batches: soon\n  policy: {pgconf: }\n",
			`p.yml:2:26: pause_between_batches: "soon": expected a duration such as 30s or a number of seconds`},
		{"plays disagree", "- hosts: a\n  serial: 2\n  policy: {pgconf: }\n- hosts: b\n  serial: 3\n  policy: {overcommit: }\n",
			`p.yml:4:3: the rollout (serial, max_fail_percentage, any_errors_fatal, pause_between_batches) is one for the whole run: this play's differs from the play at line 1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("p.yml", []byte(tt.yml), testRegistry())
			if err == nil || err.Error() != tt.want {
				t.Errorf("error = %v\nwant    %s", err, tt.want)
			}
		})
	}
}

func TestParseSerialFlag(t *testing.T) {
	got, err := ParseSerial("1, 10%,100%")
	if err != nil {
		t.Fatal(err)
	}
	want := []BatchSize{{Count: 1}, {Percent: 10}, {Percent: 100}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if _, err := ParseSerial("1,,2"); err == nil {
		t.Error("an empty entry was accepted")
	}
	// A malformed entry is called so, not out of range (it is no number).
	for in, want := range map[string]string{
		"10%%":  `entry 1: "10%%": malformed: a percentage is a number followed by one %, such as "25%"`,
		"1,x%":  `entry 2: "x%": malformed: a percentage is a number followed by one %, such as "25%"`,
		"1,0%":  `entry 2: "0%": a percentage must be above 0% and at most 100%`,
		"NaN%":  `entry 1: "NaN%": malformed: a percentage is a number followed by one %, such as "25%"`,
		"150% ": `entry 1: "150%": a percentage must be above 0% and at most 100%`,
	} {
		if _, err := ParseSerial(in); err == nil || err.Error() != want {
			t.Errorf("ParseSerial(%q) = %v, want %s", in, err, want)
		}
	}
	for in, want := range map[string]string{
		"5%%": `"5%%": malformed: expected a number from 0 to 100, such as 10 or 10%`,
		"101": `"101": expected a percentage from 0 to 100`,
	} {
		if _, err := ParsePercent(in); err == nil || err.Error() != want {
			t.Errorf("ParsePercent(%q) = %v, want %s", in, err, want)
		}
	}
}
