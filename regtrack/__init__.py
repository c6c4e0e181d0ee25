"""regtrack: tell whether a Redis version or commit made a workload faster or slower."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("regtrack")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+source"
