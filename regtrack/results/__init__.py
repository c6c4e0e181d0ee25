"""Store: the SQLite results database (schema and migrations), the comparability key
stored with every run, and the typed records analysis computes on (records.py, read by
loaded.py). Every query of the database lives in this package."""
