package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpusched/gpusched/internal/report"
	"github.com/gpusched/gpusched/internal/store"
)

// ReportFile is the report's name in the run directory when -o is not given.
const ReportFile = "report.html"

func newReportCmd() *cobra.Command {
	var runDir, out string
	c := &cobra.Command{
		Use:   "report [WORKFLOW] [--run-dir DIR] [-o FILE]",
		Short: "Write an HTML report of a run: timeline, GPU memory, tasks",
		Long: `Write one self-contained HTML file (no external scripts, fonts or images;
it works offline) showing a run: a timeline of every attempt with one lane
per card and per CPU slot, coloured by outcome; each card's memory over time
(charged by gpusched, observed in use by our tasks, foreign, capacity); and
a table of the tasks with their run time and how long they waited for their
dependencies and for a slot or a card.

Name the run with --run-dir, or give the workflow file to use its default
run directory; with neither, the one run under ./.gpusched. The report goes to RUN_DIR/report.html unless -o names
another file ("-o -" writes it to stdout); its path is printed. It reads the
state database without locking it, so it works while "gpusched run" is
going: running attempts are drawn up to now.`,
		Args: optionalWorkflow,
		RunE: func(c *cobra.Command, args []string) error {
			wf := firstArg(args)
			dir, err := findRunDir(runDir, wf)
			if err != nil {
				return err
			}
			data, err := loadReportData(dir)
			if err != nil {
				return err
			}
			if out == "-" {
				if err := report.Write(c.OutOrStdout(), data); err != nil {
					return fmt.Errorf("write report: %w", err)
				}
				return nil
			}
			path := out
			if path == "" {
				path = filepath.Join(dir, ReportFile)
			}
			if path, err = filepath.Abs(path); err != nil {
				return fmt.Errorf("report file %s: %w", out, err)
			}
			if err := writeReportFile(path, data); err != nil {
				return err
			}
			fmt.Fprintln(c.OutOrStdout(), path)
			return nil
		},
	}
	c.Flags().StringVar(&runDir, "run-dir", "", "run directory")
	c.Flags().StringVarP(&out, "output", "o", "", `file to write (default RUN_DIR/`+ReportFile+`; "-": stdout)`)
	return c
}

// loadReportData reads what a report shows through a read-only connection.
func loadReportData(dir string) (report.Data, error) {
	path, err := statePath(dir)
	if err != nil {
		return report.Data{}, err
	}
	st, err := store.OpenSQLiteReadOnly(path, dir)
	if err != nil {
		return report.Data{}, err
	}
	defer st.Close()
	d := report.Data{RunDir: dir, Live: schedulerPID(dir) > 0}
	if d.Rows, err = st.Load(); err != nil {
		return report.Data{}, err
	}
	if d.Cards, _, err = st.LoadCards(); err != nil {
		return report.Data{}, err
	}
	if d.Samples, err = st.LoadSamples(); err != nil {
		return report.Data{}, err
	}
	meta, err := st.LoadMeta()
	if err != nil {
		return report.Data{}, err
	}
	d.GPUUnknown = meta[store.MetaGPUUnknown]
	d.Now = time.Now()
	return d, nil
}

// writeReportFile writes the report to a temporary file beside path and
// renames it into place, so a reader never sees half a report.
func writeReportFile(path string, data report.Data) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	defer os.Remove(f.Name()) // after a successful rename there is nothing left to remove
	if err := report.Write(f, data); err != nil {
		f.Close()
		return fmt.Errorf("write report %s: %w", path, err)
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return fmt.Errorf("write report %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write report %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("write report %s: %w", path, err)
	}
	return nil
}
