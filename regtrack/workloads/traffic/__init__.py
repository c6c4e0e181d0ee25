"""A live server's traffic, sampled (MONITOR), redacted at parse and read for its shapes."""
