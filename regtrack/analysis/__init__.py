"""Analyse: cells and comparisons, pooled answers and sequential intervals, the CI
decision, instruction attribution, history and change points. Reads the store only."""
