// Package report renders a bench run's figures (a result.Report): the Markdown page of
// docs/benchmarks.md, the PNG plots beside it (with gonum/plot) and the summary printed at the
// end of a run. Only the commands that render a report import it, so the plotting library stays
// out of the packages that measure, and out of the rest of trellis.
package report
