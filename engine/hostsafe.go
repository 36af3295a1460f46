package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/transport"
)

// runHost runs one host's work (connect, facts, check, apply, rollback)
// so that a panic in it — a bug, most likely tripped by something odd the
// host sent — fails that host alone: the other hosts' goroutines go on
// and the run still reports. The stack goes to the debug log.
func (s *Session) runHost(ctx context.Context, hr *hostRun, fn func(context.Context, *hostRun)) {
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		hr.err = fmt.Errorf("%s: internal error: %v (a bug in pgtune; the stack is in the debug log, -v)", hr.host.Name, v)
		log := s.log(hr)
		log.Error("internal error", "panic", fmt.Sprint(v))
		log.Debug("internal error stack", "stack", string(debug.Stack()))
	}()
	fn(ctx, hr)
}

// hostFault reports errors that say the host answered, but with something
// pgtune refuses (too much output, a number out of range): the host is
// reachable and failed, not unreachable.
func hostFault(err error) bool {
	var rangeErr *facts.RangeError
	return errors.Is(err, transport.ErrOutputTooLarge) || errors.As(err, &rangeErr)
}
