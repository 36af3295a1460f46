package facts

import (
	"errors"
	"testing"
)

func TestParseInt(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr string
	}{
		{in: "42", want: 42},
		{in: " 7\n", want: 7},
		{in: "0", want: 0},
		{in: "100", want: 100},
		{in: "-2", wantErr: "stat size -2 out of range [0, 100]"},
		{in: "101", wantErr: "stat size 101 out of range [0, 100]"},
		{in: "99999999999", wantErr: "stat size 99999999999 out of range [0, 100]"},
		{in: "99999999999999999999", wantErr: "stat size 99999999999999999999 out of range [0, 100]"},
		{in: "-99999999999999999999", wantErr: "stat size -99999999999999999999 out of range [0, 100]"},
		{in: "", wantErr: `stat size "" is not a number`},
		{in: "12abc", wantErr: `stat size "12abc" is not a number`},
		{in: "0x10", wantErr: `stat size "0x10" is not a number`},
		{in: "1e3", wantErr: `stat size "1e3" is not a number`},
		{in: "\x1b[2Kok", wantErr: `stat size "\x1b[2Kok" is not a number`},
		{in: "1234567890123456789012345678901234567890", wantErr: "stat size 12345678901234567890123456789012… out of range [0, 100]"},
	}
	for _, tc := range tests {
		got, err := ParseInt("stat size", tc.in, 0, 100)
		if tc.wantErr == "" {
			if err != nil || got != tc.want {
				t.Errorf("ParseInt(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
			}
			continue
		}
		var re *RangeError
		if !errors.As(err, &re) || err.Error() != tc.wantErr {
			t.Errorf("ParseInt(%q) = %d, %v; want %q", tc.in, got, err, tc.wantErr)
		}
	}
}

func TestRangeErrorEscapesHostText(t *testing.T) {
	_, err := ParseInt("meminfo \x1b[2KMemTotal", "-1", 0, 10)
	if err == nil || err.Error() != `meminfo \x1b[2KMemTotal -1 out of range [0, 10]` {
		t.Fatalf("err = %q", err)
	}
}
