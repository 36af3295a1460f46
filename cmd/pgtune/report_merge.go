package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/pgtune/pgtune/engine/report"
)

const reportUsage = `Usage:
  pgtune report merge [--format json|text|junit] FILE...

merge joins the JSON reports (--format json) of the --shard i/n jobs of one
check or apply into the document a single run over all their hosts prints:
hosts sorted by name, the summary recomputed. A host in two files, check
reports mixed with apply reports (an apply report has a run_id, a check
report none), or a file that is not a whole pgtune report is an error and
nothing is printed. Apply shards of one run id keep it as "run_id"; of
several (each shard job its own run), all of them, sorted, as "run_ids"
(each for rollback --run on its shard's hosts).

Exit codes as the single run: 0 every host in policy (check) or ok
(apply), 2 drift on some host and no errors, 1 any failed or unreachable
host, or an error.
`

// reportCommand is "pgtune report merge".
func (a *App) reportCommand(code *int) *cobra.Command {
	rep := &cobra.Command{
		Use:   "report merge",
		Short: "Work with JSON reports: merge the reports of shards",
		Long:  reportUsage,
		RunE: func(*cobra.Command, []string) error {
			fmt.Fprint(a.Stderr, reportUsage)
			*code = 1
			return nil
		},
	}
	format, noColor := "json", false
	merge := &cobra.Command{
		Use:   "merge FILE...",
		Short: "Merge the JSON reports of --shard jobs into one report",
		Long:  reportUsage,
		Example: `  pgtune report merge shard-*.json > fleet.json
  pgtune report merge --format junit shard-*.json > audit.xml`,
		RunE: func(cmd *cobra.Command, args []string) error {
			switch format {
			case "json", "text", "junit":
			default:
				return fmt.Errorf("pgtune report merge: --format must be json, text or junit, not %q", format)
			}
			if len(args) == 0 {
				return fmt.Errorf("pgtune report merge: no FILE given (the JSON reports of the shards)")
			}
			*code = a.runReportMerge(format, noColor, args)
			return nil
		},
	}
	merge.Flags().StringVar(&format, "format", "json", "output `format`: json (the same document as a run), text, or junit")
	merge.Flags().BoolVar(&noColor, "no-color", false, "no colour in text, even on a terminal (NO_COLOR does the same)")
	registerCompletions(merge)
	rep.AddCommand(merge)
	return rep
}

// runReportMerge reads the files, merges them and writes the result.
func (a *App) runReportMerge(format string, noColor bool, files []string) int {
	parts := make([]report.Part, 0, len(files))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return a.fail(fmt.Errorf("report merge: %w", err))
		}
		parts = append(parts, report.Part{Name: f, Data: data})
	}
	r, err := report.Merge(parts)
	if err != nil {
		return a.fail(fmt.Errorf("report merge: %w", err))
	}
	switch format {
	case "junit":
		err = report.WriteJUnit(a.Stdout, r)
	case "text":
		err = report.WriteTextWith(a.Stdout, r, report.TextOptions{Color: colorFor(a.Stdout, noColor).On})
	default:
		err = report.WriteJSON(a.Stdout, r)
	}
	if err != nil {
		return a.fail(fmt.Errorf("report merge: writing the report: %w", err))
	}
	return r.ExitCode()
}
