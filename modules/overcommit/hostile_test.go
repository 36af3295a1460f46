package overcommit

import "testing"

// The committers hint lists what the host printed; lines whose PID or
// size is garbled, negative or out of range are left out, not trusted.
func TestParseCommittersHostile(t *testing.T) {
	out := "-1 100 evil\n0 100 zero\n4194305 100 toobig\n12 -5 neg\n13 99999999999999999999 huge\n14 1152921504606846977 overmax\nx 1 nan\n15 200 postgres\n16 1125899906842624 big\n"
	cs := parseCommitters(out)
	if len(cs) != 2 || cs[0].pid != 16 || cs[1].pid != 15 || cs[1].name != "postgres" {
		t.Fatalf("committers = %+v", cs)
	}
}
