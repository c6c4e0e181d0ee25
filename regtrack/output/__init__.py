"""Present: terminal and Markdown/CSV/JSON tables, the CI summary, progress, and the HTML
report. Never measures."""
