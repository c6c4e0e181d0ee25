"""Store: the SQLite results database (schema and migrations) and the comparability key
stored with every run."""
