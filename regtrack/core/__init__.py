"""Bottom layer: what every stage may use. Errors and exit codes, records that cross
stages, processes, CPUs and locks, interrupts, environment facts, settings files, the
Docker engine client."""
