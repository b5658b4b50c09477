//! Renders [`crate::results::Results`]: terminal tables, report.md,
//! results.json and a self-contained report.html with inline SVG charts.
