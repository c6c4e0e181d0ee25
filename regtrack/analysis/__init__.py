"""Analyse: cells and comparisons, pooled answers and sequential intervals, the CI
decision, instruction attribution, history and change points. Computes on records the
caller loaded (results.loaded -> results.records) and never opens the database, so every
answer can be tested on data built in memory."""
