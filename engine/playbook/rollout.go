package playbook

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/pgtune/pgtune/engine/expr"
)

// Rollout is how an apply moves through the fleet: in batches (Serial),
// within a failure budget counted over the whole run. It is a property of
// the run, not of one play: plays that set it must agree.
type Rollout struct {
	// Serial lists batch sizes; the last one repeats until every host is
	// done. Empty: one batch of every host.
	Serial []BatchSize
	// MaxFailPercentage stops the rollout once more than this share of the
	// run's hosts failed (unreachable counts as failed); nil: no budget.
	MaxFailPercentage *float64
	// AnyErrorsFatal stops the rollout after the first failed host.
	AnyErrorsFatal bool
	// PauseBetweenBatches is waited between two batches.
	PauseBetweenBatches time.Duration
	// Line is where the play that set it starts (0: not set).
	Line int
}

// BatchSize is one entry of serial: a count of hosts, or a percentage of
// the run's hosts when Percent is set.
type BatchSize struct {
	Count   int
	Percent float64 // (0, 100]; 0: Count is used
}

func (b BatchSize) String() string {
	if b.Percent > 0 {
		return strconv.FormatFloat(b.Percent, 'f', -1, 64) + "%"
	}
	return strconv.Itoa(b.Count)
}

// IsZero reports whether no rollout key was set.
func (r Rollout) IsZero() bool {
	return len(r.Serial) == 0 && r.MaxFailPercentage == nil && !r.AnyErrorsFatal && r.PauseBetweenBatches == 0
}

// Equal reports whether r and o ask for the same rollout.
func (r Rollout) Equal(o Rollout) bool {
	r.Line, o.Line = 0, 0
	return reflect.DeepEqual(r, o)
}

// rolloutKeys are the play keys that shape the rollout.
var rolloutKeys = []string{"serial", "max_fail_percentage", "any_errors_fatal", "pause_between_batches"}

// rolloutFields are the rollout keys in the strict pass's play type. They
// are decoded and checked by rolloutKey; the strict pass only has to know
// them.
func rolloutFields() []reflect.StructField {
	out := make([]reflect.StructField, len(rolloutKeys))
	for i, k := range rolloutKeys {
		out[i] = reflect.StructField{Name: fmt.Sprintf("R%d", i), Type: reflect.TypeOf(yaml.Node{}), Tag: reflect.StructTag(fmt.Sprintf(`yaml:%q`, k))}
	}
	return out
}

// rolloutKey decodes one rollout key of play p.
func (l *loader) rolloutKey(p *Play, k, v *yaml.Node) {
	if v.Kind == yaml.ScalarNode && v.ShortTag() == "!!null" {
		return // "serial:" or "serial: null": unset, as Ansible reads it
	}
	if p.Rollout.Line == 0 {
		p.Rollout.Line = p.Line
	}
	var err error
	switch k.Value {
	case "serial":
		p.Rollout.Serial, err = parseSerialNode(v)
	case "max_fail_percentage":
		var pct float64
		if pct, err = parsePercent(v); err == nil {
			p.Rollout.MaxFailPercentage = &pct
		}
	case "any_errors_fatal":
		// As Ansible reads it: yes/no too (YAML 1.2 leaves them strings).
		b, ok := expr.ParseBool(v.Value)
		if v.Kind != yaml.ScalarNode || !ok {
			err = fmt.Errorf("expected true or false, got %s", describeNode(v))
		} else {
			p.Rollout.AnyErrorsFatal = b
		}
	case "pause_between_batches":
		p.Rollout.PauseBetweenBatches, err = parsePause(v)
	}
	if err != nil {
		l.add(v, "%s: %v", k.Value, err)
	}
}

// mergeRollout makes the run's rollout from the plays': plays that set
// rollout keys must set the same ones.
func (l *loader) mergeRollout(pb *Playbook) {
	var first *Play
	for _, p := range pb.Plays {
		if p.Rollout.IsZero() {
			continue
		}
		if first == nil {
			first = p
			pb.Rollout = p.Rollout
			continue
		}
		if !p.Rollout.Equal(first.Rollout) {
			l.errs = append(l.errs, &expr.PosError{File: l.file, Line: p.Line, Column: 3,
				Msg: fmt.Sprintf("the rollout (serial, max_fail_percentage, any_errors_fatal, pause_between_batches) is one for the whole run: this play's differs from the play at line %d", first.Line)})
		}
	}
}

func parseSerialNode(v *yaml.Node) ([]BatchSize, error) {
	switch v.Kind {
	case yaml.ScalarNode:
		b, err := ParseBatchSize(v.Value)
		if err != nil {
			return nil, err
		}
		return []BatchSize{b}, nil
	case yaml.SequenceNode:
		if len(v.Content) == 0 {
			return nil, fmt.Errorf("an empty list (give a size, a percentage or a list of them)")
		}
		var out []BatchSize
		for i, e := range v.Content {
			if e.Kind != yaml.ScalarNode {
				return nil, fmt.Errorf("entry %d: expected a number or a percentage, got %s", i+1, describeNode(e))
			}
			b, err := ParseBatchSize(e.Value)
			if err != nil {
				return nil, fmt.Errorf("entry %d: %w", i+1, err)
			}
			out = append(out, b)
		}
		return out, nil
	}
	return nil, fmt.Errorf("expected a number, a percentage or a list of them, got %s", describeNode(v))
}

// ParseSerial reads serial as the command line gives it: one size or a
// comma-separated list ("1,10%,100%").
func ParseSerial(s string) ([]BatchSize, error) {
	var out []BatchSize
	for i, f := range strings.Split(s, ",") {
		b, err := ParseBatchSize(f)
		if err != nil {
			return nil, fmt.Errorf("entry %d: %w", i+1, err)
		}
		out = append(out, b)
	}
	return out, nil
}

// ParseBatchSize reads "5" or "25%". A count is at least 1; a percentage
// is in (0, 100].
func ParseBatchSize(s string) (BatchSize, error) {
	s = strings.TrimSpace(s)
	if p, ok := strings.CutSuffix(s, "%"); ok {
		f, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || math.IsNaN(f) {
			return BatchSize{}, fmt.Errorf("%q: malformed: a percentage is a number followed by one %%, such as \"25%%\"", s)
		}
		if f <= 0 || f > 100 {
			return BatchSize{}, fmt.Errorf("%q: a percentage must be above 0%% and at most 100%%", s)
		}
		return BatchSize{Percent: f}, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return BatchSize{}, fmt.Errorf("%q: a batch size is a whole number of hosts (at least 1) or a percentage such as \"25%%\"", s)
	}
	return BatchSize{Count: n}, nil
}

func parsePercent(v *yaml.Node) (float64, error) {
	if v.Kind != yaml.ScalarNode || (v.ShortTag() != "!!int" && v.ShortTag() != "!!float") {
		return 0, fmt.Errorf("expected a percentage from 0 to 100, got %s", describeNode(v))
	}
	return ParsePercent(v.Value)
}

// ParsePercent reads a failure budget: a number from 0 to 100 (a trailing
// % is accepted).
func ParsePercent(s string) (float64, error) {
	f, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(s), "%"), 64)
	if err != nil || math.IsNaN(f) {
		return 0, fmt.Errorf("%q: malformed: expected a number from 0 to 100, such as 10 or 10%%", s)
	}
	if f < 0 || f > 100 {
		return 0, fmt.Errorf("%q: expected a percentage from 0 to 100", s)
	}
	return f, nil
}

// parsePause reads a duration ("30s", "2m") or a number of seconds.
func parsePause(v *yaml.Node) (time.Duration, error) {
	if v.Kind != yaml.ScalarNode || v.ShortTag() == "!!null" {
		return 0, fmt.Errorf("expected a duration such as 30s or a number of seconds, got %s", describeNode(v))
	}
	return ParsePause(v.Value)
}

// ParsePause reads a pause: a Go duration ("90s", "2m") or seconds ("30").
func ParsePause(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	d, err := time.ParseDuration(s)
	if err != nil {
		secs, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || math.IsNaN(secs) || math.IsInf(secs, 0) {
			return 0, fmt.Errorf("%q: expected a duration such as 30s or a number of seconds", s)
		}
		d = time.Duration(secs * float64(time.Second))
	}
	if d < 0 || d > 24*time.Hour {
		return 0, fmt.Errorf("%q: a pause must be from 0 to 24h", s)
	}
	return d, nil
}
