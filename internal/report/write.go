package report

import (
	"bufio"
	_ "embed"
	"html/template"
	"io"
	"sync"
)

//go:embed report.html.tmpl
var pageText string

// pageTmpl is parsed at the first page rendered, not at start-up: every
// gpusched process links this package, and parsing the page took some
// 0.3-0.6 ms of each one's start, a run's three included.
var pageTmpl = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("report").Parse(pageText))
})

// Write renders the report of d as one self-contained HTML page.
func Write(w io.Writer, d Data) error {
	return Render(w, Build(d))
}

// Render writes m as one self-contained HTML page.
func Render(w io.Writer, m Model) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	if err := pageTmpl().Execute(bw, m); err != nil {
		return err
	}
	return bw.Flush()
}
