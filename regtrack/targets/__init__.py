"""Plan, what to measure it on: version specs resolved to targets (commits, binaries, images),
source repositories, cached builds, Docker images."""
