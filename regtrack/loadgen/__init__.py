"""Load generators: build a command line, run it pinned, parse what it reports."""
