package report

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"strings"

	"github.com/pgtune/pgtune/internal/termsafe"
)

// JUnit XML, the test report format CI systems (GitLab, Jenkins, GitHub
// test reporters, Buildkite) show: one test suite per run, one test case
// per host. A drifting host fails with its plan, a failed or unreachable
// host with its error (the failure's message; the host's block is its
// text); a host skipped (no PostgreSQL, matched only through "all") is a
// skipped test case; in-policy and verified hosts pass.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Skipped  int          `xml:"skipped,attr,omitempty"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Errors   int         `xml:"errors,attr"`
	Skipped  int         `xml:"skipped,attr,omitempty"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	ClassName string        `xml:"classname,attr"`
	Failure   *junitProblem `xml:"failure,omitempty"`
	Skipped   *junitSkipped `xml:"skipped,omitempty"`
	SystemOut *junitText    `xml:"system-out,omitempty"`
}

type junitText struct {
	Text string `xml:",cdata"`
}

type junitSkipped struct {
	Message string `xml:"message,attr"`
}

type junitProblem struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",cdata"`
}

// WriteJUnit writes the report as JUnit XML. Host text is masked and
// escaped as in the text report (and XML-escaped on top).
func WriteJUnit(w io.Writer, r *Report) error {
	r = maskNotes(r)
	suite := junitSuite{Name: "pgtune " + string(r.Mode)}
	for _, h := range r.Hosts {
		c := junitCase{Name: h.Name, ClassName: "pgtune." + string(r.Mode)}
		var plan bytes.Buffer
		_ = NewPrinter(&plan, r.Mode, TextOptions{}).Host(h)
		text := strings.TrimRight(plan.String(), "\n")
		switch h.Status {
		case Drift:
			c.Failure = &junitProblem{Message: fmt.Sprintf("drift: %s to make", plural(len(h.Changes), "change")), Type: "drift", Text: text}
			suite.Failures++
		case Failed, Unreachable:
			msg := string(h.Status)
			if h.Error != nil {
				msg = termsafe.Line(hostless(h.Name, *h.Error))
			}
			c.Failure = &junitProblem{Message: msg, Type: string(h.Status), Text: text}
			suite.Failures++
		case Skipped:
			c.Skipped = &junitSkipped{Message: "no PostgreSQL cluster; left untouched"}
			c.SystemOut = &junitText{Text: text}
			suite.Skipped++
		default:
			c.SystemOut = &junitText{Text: text}
		}
		suite.Cases = append(suite.Cases, c)
	}
	suite.Tests = len(suite.Cases)
	doc := junitSuites{Name: "pgtune", Tests: suite.Tests, Failures: suite.Failures, Errors: suite.Errors, Skipped: suite.Skipped, Suites: []junitSuite{suite}}
	out, err := xml.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	_, err = w.Write(append(out, '\n'))
	return err
}
