package facts

import (
	"fmt"
	"strconv"
	"strings"
)

// maxMinFreeKB bounds vm.min_free_kbytes as read from a host: the kernel
// takes an int, and a reserve beyond MemTotal is not a real one.
const maxMinFreeKB = 1<<31 - 1

// setKernelReserve fills MinFree and SUnreclaim, the memory the kernel
// keeps for itself that the commit budget does not see. Both come from
// the host, so both are bounds-checked: an absent min_free_kbytes (no
// R line) stays 0, a malformed or impossible one is an error.
func (f *Facts) setKernelReserve(sunreclaim int64, minFreeKB string) error {
	if sunreclaim < 0 || sunreclaim > f.MemTotal {
		return fmt.Errorf("SUnreclaim %d kB is outside [0, MemTotal %d kB]", sunreclaim>>10, f.MemTotal>>10)
	}
	f.SUnreclaim = sunreclaim
	if minFreeKB == "" {
		return nil
	}
	kb, err := strconv.ParseInt(strings.TrimSpace(minFreeKB), 10, 64)
	if err != nil || kb < 0 || kb > maxMinFreeKB || kb<<10 > f.MemTotal {
		return fmt.Errorf("vm.min_free_kbytes %q is not a size in [0, MemTotal %d kB]", minFreeKB, f.MemTotal>>10)
	}
	f.MinFree = kb << 10
	return nil
}
