package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// notReached starts the error of a host a rollout never tried (rollout).
const notReached = "not reached: "

// Part is one JSON report to merge (a --shard i/n job's document) and
// where it came from, for errors.
type Part struct {
	Name string // file name, as the user gave it
	Data []byte
}

// document is the JSON contract as read back: hosts and summary must both
// be there, so that any other JSON is refused rather than read as empty.
type document struct {
	RunID   string   `json:"run_id"`
	RunIDs  []string `json:"run_ids"`
	Hosts   *[]Host  `json:"hosts"`
	Summary *Summary `json:"summary"`
}

// statusModes says which kind of run each status comes from; failed,
// unreachable and skipped occur in both.
var statusModes = map[Status]Mode{
	InPolicy: ModeCheck, Drift: ModeCheck,
	Changed: ModeApply, OK: ModeApply,
	Failed: "", Unreachable: "", Skipped: "",
}

// Merge joins the reports of the shards of one run into the report a
// single run over all their hosts would have printed: hosts sorted by
// name, summary recomputed. It refuses a document that is not a pgtune
// report, a status it does not know, a summary that does not match its
// hosts (a truncated or edited file), a host present twice (the same
// shard merged twice, or shards of different selections), and check
// reports mixed with apply reports: an apply report has a run_id, a check
// report none, whatever its hosts' statuses (a shard whose hosts all
// failed has only statuses both share).
//
// Apply shards are jobs of their own, each with its run id, which
// rollback --run needs: one shared by every part stays "run_id"; several
// are kept, sorted, in "run_ids" (no run_id then: any one of them would
// name the run of only some hosts).
func Merge(parts []Part) (*Report, error) {
	if len(parts) == 0 {
		return nil, errors.New("no report to merge")
	}
	out := &Report{Hosts: []Host{}}
	from := map[string]string{} // host name → the part it came from
	runIDs := map[string]bool{}
	var modeFrom string
	given := map[string]bool{}
	for _, p := range parts {
		if given[p.Name] {
			return nil, fmt.Errorf("%s is given twice", p.Name)
		}
		given[p.Name] = true
		doc, err := readDocument(p)
		if err != nil {
			return nil, err
		}
		ids := doc.RunIDs
		if doc.RunID != "" {
			ids = append(ids, doc.RunID)
		}
		for _, id := range ids {
			runIDs[id] = true
		}
		for _, h := range *doc.Hosts {
			if prev, dup := from[h.Name]; dup && prev == p.Name {
				return nil, fmt.Errorf("%s: host %q is listed twice", p.Name, h.Name)
			} else if dup {
				return nil, fmt.Errorf("%s: host %q is also in %s: each host must be in one shard report only", p.Name, h.Name, prev)
			}
			from[h.Name] = p.Name
			mode := statusModes[h.Status]
			if mode == "" {
				continue
			}
			if len(ids) > 0 && mode != ModeApply {
				return nil, fmt.Errorf("%s: host %q has status %q of %s report, in an apply report (it has a run_id)", p.Name, h.Name, h.Status, aMode(mode))
			}
			if out.Mode == "" {
				out.Mode, modeFrom = mode, p.Name
			} else if mode != out.Mode {
				return nil, fmt.Errorf("%s: host %q has status %q of %s report, and %s is %s report: merge the shards of one run", p.Name, h.Name, h.Status, aMode(mode), modeFrom, aMode(out.Mode))
			}
		}
		// The run_id tells the part's kind where its statuses do not.
		switch {
		case len(*doc.Hosts) == 0 && len(ids) == 0:
			// An empty shard: either kind.
		case len(ids) > 0 && out.Mode == ModeCheck:
			return nil, fmt.Errorf("%s: an apply report (it has a run_id), and %s is a check report: merge the shards of one run", p.Name, modeFrom)
		case len(ids) > 0:
			out.Mode, modeFrom = ModeApply, p.Name
		case out.Mode == ModeApply && !hasStatusOf(*doc.Hosts, ModeApply):
			return nil, fmt.Errorf("%s: a check report (it has no run_id, which every apply report has), and %s is an apply report: merge the shards of one run", p.Name, modeFrom)
		case out.Mode == "":
			out.Mode, modeFrom = ModeCheck, p.Name
		}
		for _, h := range *doc.Hosts {
			// The document has no status for a host a rollout never
			// tried; its error says so, and the text does again.
			h.NotReached = h.Status == Failed && h.Error != nil && strings.HasPrefix(*h.Error, notReached)
			out.Hosts = append(out.Hosts, h)
		}
	}
	if out.Mode == "" {
		out.Mode = ModeCheck
	}
	switch len(runIDs) {
	case 0:
	case 1:
		for id := range runIDs {
			out.RunID = id // one run's parts
		}
	default:
		for id := range runIDs {
			out.RunIDs = append(out.RunIDs, id)
		}
		sort.Strings(out.RunIDs)
	}
	sort.SliceStable(out.Hosts, func(i, j int) bool { return out.Hosts[i].Name < out.Hosts[j].Name })
	out.Summarize()
	return out, nil
}

// aMode is "a check", "an apply".
func aMode(m Mode) string {
	if m == ModeApply {
		return "an apply"
	}
	return "a " + string(m)
}

// hasStatusOf reports whether a host has a status only a mode's reports
// have (changed, ok: apply; a rollback's report has them too, without a
// run_id).
func hasStatusOf(hosts []Host, mode Mode) bool {
	for _, h := range hosts {
		if statusModes[h.Status] == mode {
			return true
		}
	}
	return false
}

// readDocument decodes one part and checks it is a whole pgtune report.
func readDocument(p Part) (*document, error) {
	var doc document
	dec := json.NewDecoder(bytes.NewReader(p.Data))
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%s: not a pgtune JSON report: %w", p.Name, jsonErr(p.Data, err))
	}
	if dec.More() {
		return nil, fmt.Errorf("%s: more than one JSON document; give each report as its own file", p.Name)
	}
	if doc.Hosts == nil || doc.Summary == nil {
		return nil, fmt.Errorf("%s: not a pgtune JSON report: it has no \"hosts\" and \"summary\"", p.Name)
	}
	check := Report{Hosts: *doc.Hosts}
	for i, h := range check.Hosts {
		if h.Name == "" {
			return nil, fmt.Errorf("%s: hosts[%d] has no name", p.Name, i)
		}
		if _, ok := statusModes[h.Status]; !ok {
			return nil, fmt.Errorf("%s: host %q: unknown status %q", p.Name, h.Name, h.Status)
		}
	}
	check.Summarize()
	if check.Summary != *doc.Summary {
		return nil, fmt.Errorf("%s: its summary does not count its hosts (%d hosts listed, summary says %d): the file is truncated or was edited", p.Name, len(check.Hosts), doc.Summary.Hosts)
	}
	return &doc, nil
}

// jsonErr adds the line of a syntax error.
func jsonErr(data []byte, err error) error {
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		line := 1 + bytes.Count(data[:min(int(syn.Offset), len(data))], []byte("\n"))
		return fmt.Errorf("line %d: %w", line, err)
	}
	return err
}
