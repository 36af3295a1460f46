package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/pgtune/pgtune/engine/transport"
)

// ErrInterrupted is a host's error when the run was asked to stop (Ctrl-C)
// before the host's next module started.
var ErrInterrupted = errors.New("interrupted")

// ApplyHooks let a caller steer Apply from outside without cancelling the
// context the hosts work under: a cancelled context kills the command in
// flight, while Stop lets every host finish the module it is in (no
// half-written file, no postgres left stopped) and start no other.
type ApplyHooks struct {
	// Stop, once closed, keeps every host from starting another module.
	Stop <-chan struct{}
	// Done is called once per host of the session when Apply is through
	// with it: from the host's goroutine, or, for the hosts of a
	// replication-cluster wave, once the wave's standbys have been waited
	// for (clusters.go), so a run state never holds a standby verified
	// before its wait.
	Done func(HostResult)
}

// HostResult is one host's outcome of Apply as Done sees it.
type HostResult struct {
	Name string
	// Err is nil when the host is ok and verified.
	Err error
	// Unreachable says the connection failed or was lost.
	Unreachable bool
	// Started says some module began applying: an interrupted host that
	// had not started is untouched.
	Started bool
	// Changed says the host was changed.
	Changed bool
}

type applyHooksKey struct{}

// WithApplyHooks returns ctx carrying hooks for Session.Apply.
func WithApplyHooks(ctx context.Context, h ApplyHooks) context.Context {
	return context.WithValue(ctx, applyHooksKey{}, h)
}

func applyHooksOf(ctx context.Context) ApplyHooks {
	h, _ := ctx.Value(applyHooksKey{}).(ApplyHooks)
	return h
}

// stopBefore is the host's error when the run was asked to stop before
// module starts on it; nil otherwise.
func stopBefore(ctx context.Context, hr *hostRun, module string) error {
	stop := applyHooksOf(ctx).Stop
	if stop == nil {
		return nil
	}
	select {
	case <-stop:
		return fmt.Errorf("%s: %w before %s", hr.host.Name, ErrInterrupted, module)
	default:
		return nil
	}
}

// cutShort is a host's error when ctx was cancelled (Ctrl-C) while the
// host was reached or read: the user stopped it, so it is neither
// unreachable nor at fault. nil otherwise: a host timeout (a deadline)
// stays the host's failure.
func cutShort(ctx context.Context, host string) error {
	if errors.Is(ctx.Err(), context.Canceled) {
		return fmt.Errorf("%s: %w before it was read", host, ErrInterrupted)
	}
	return nil
}

// hostApplied tells the Done hook how the host came out.
func hostApplied(ctx context.Context, hr *hostRun, started *bool) {
	done := applyHooksOf(ctx).Done
	if done == nil {
		return
	}
	done(HostResult{
		Name:        hr.host.Name,
		Err:         hr.err,
		Unreachable: hr.unreachable || errors.Is(hr.err, transport.ErrConnectionLost),
		Started:     *started,
		Changed:     len(hr.applied) > 0,
	})
}

// PendingRestart reports whether a note says a restart was left for later
// (a module told to leave its service running on old values).
func PendingRestart(notes []string) bool {
	for _, n := range notes {
		if strings.HasPrefix(n, "pending restart") {
			return true
		}
	}
	return false
}
