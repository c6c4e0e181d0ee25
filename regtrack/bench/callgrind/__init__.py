"""Instructions per operation under callgrind: running the server, reading its profiles."""
