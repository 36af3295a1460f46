package inventory

import (
	"flag"
	"testing"

	"github.com/pgtune/pgtune/internal/badinput"
)

var update = flag.Bool("update", false, "write testdata/bad/*.err from the current messages")

// TestBadInputs loads every testdata/bad/NAME.yml and compares the error with NAME.err
// exactly (one problem per line); each message must name the file.
func TestBadInputs(t *testing.T) {
	badinput.Check(t, "testdata/bad", *update, func(file string, data []byte) error {
		_, err := Parse(file, data)
		return err
	})
}
