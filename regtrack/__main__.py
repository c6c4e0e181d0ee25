"""``python -m regtrack`` runs the command line."""

import sys

from regtrack.cli import main

main(sys.argv[1:])
