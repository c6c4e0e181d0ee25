"""Measure: the Job (options resolved and built), the plan and runner, one trial, server
setup and stats, seeds, shards, plus runtimes/, loadgen/ and callgrind/. Never formats and
never decides: the loops that measure until decided are in regtrack/flows."""
