"""Measure: the Job (options resolved and built), the run orchestration the CLI calls, the
plan and runner, one trial, server setup and stats, resume, plus runtimes/, loadgen/ and
callgrind/. Never formats: progress and messages go out through callbacks."""
