package report

import (
	"bufio"
	_ "embed"
	"html/template"
	"io"
)

//go:embed report.html.tmpl
var pageText string

var pageTmpl = template.Must(template.New("report").Parse(pageText))

// Write renders the report of d as one self-contained HTML page.
func Write(w io.Writer, d Data) error {
	return Render(w, Build(d))
}

// Render writes m as one self-contained HTML page.
func Render(w io.Writer, m Model) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	if err := pageTmpl.Execute(bw, m); err != nil {
		return err
	}
	return bw.Flush()
}
