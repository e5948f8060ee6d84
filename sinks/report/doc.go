// Package report turns a run's Parquet outputs into a self-contained HTML
// page with plots, and PNG copies of each plot.
//
// # Inputs
//
// Everything is read from one output directory (default ./swerl-out):
// instances/*.parquet, samples/*.parquet and the checkpoint index
// (index.parquet, or checkpoints/index.parquet). Any of them may be missing;
// the page then says which data it did not find instead of failing.
//
// # Outputs
//
// DIR/report/index.html (no external assets: plots are inline SVG) and one
// PNG per plot beside it. Files are written under temporary names and renamed.
package report
