"""Plan, what to measure: workload files and their model, points and the load each sends,
reply checks, Redis command metadata, and mix capture from a live server."""
