"""What the offline source set is made of: the pinned releases (releases.toml, shipped as
package data so that an installed regtrack has them) and the constants that, with them,
determine every commit SHA."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import tomllib
from collections.abc import Callable
from functools import cache
from importlib import resources

from regtrack.core.errors import BadInput

# Told each step ("downloading ...", "committed ..."): this layer never prints.
Progress = Callable[[str], None]

MANIFEST_NAME = "regtrack-offline-sources.json"
# Written into every commit message and the manifest: changing it changes every SHA, so it
# keeps the name of the script that made the first repositories.
SCRIPT_ID = "regtrack scripts/offline_source_repo.py"
GIT_IDENT_NAME = "regtrack offline-source-repo"
GIT_IDENT_EMAIL = "offline-source-repo@regtrack.invalid"
# Bump when anything that changes commit SHAs changes (message layout etc.).
FORMAT_VERSION = 1
# Folders of pinned release archives (os.pathsep-separated) used before any download.
ARCHIVES_ENV = "REGTRACK_SOURCE_ARCHIVES"


@dataclasses.dataclass(frozen=True)
class Source:
    """One upstream release and the registry file that carries it.

    The fields, in this order, are hashed into the recipe digest: keep them as they are."""

    version: str
    origin: str  # "pypi" or "debian"
    package: str  # PyPI project or Debian source package name
    where: str  # PyPI release version, or Debian suite
    filename: str  # file as published by the registry
    sha256: str
    date: str  # commit date: upstream's release commit date (UTC)
    upstream_commit: str = ""  # upstream git commit the tarball was made from
    repack_note: str = ""  # set when the registry file is not pristine upstream
    optional: bool = False  # skip (with a warning) when it cannot be downloaded

    @property
    def series(self) -> str:
        return ".".join(self.version.split(".")[:2])

    @property
    def origin_text(self) -> str:
        if self.origin == "pypi":
            return f"PyPI {self.package}=={self.where}"
        return f"Debian {self.where}"


@dataclasses.dataclass(frozen=True)
class Product:
    """A server whose releases the set holds (Redis, or Valkey to exercise a fork)."""

    name: str
    title: str
    version_macro: str  # macro in src/version.h holding the release version
    sources: tuple[Source, ...]  # oldest first; the last one becomes "unstable"


@cache
def products() -> dict[str, Product]:
    """Every product of releases.toml, by name."""
    text = resources.files(__package__).joinpath("releases.toml").read_text()
    found = {}
    for name, entry in tomllib.loads(text).items():
        sources = tuple(Source(**fields) for fields in entry["sources"])
        found[name] = Product(name, entry["title"], entry["version_macro"], sources)
    return found


def product(name: str) -> Product:
    """The product called ``name``; BadInput naming the known ones otherwise."""
    known = products()
    if name not in known:
        raise BadInput(f"no offline source set for {name!r}; choose {' or '.join(sorted(known))}")
    return known[name]


def recipe_digest(product: Product) -> str:
    """Fingerprint of everything that determines the repository's content."""
    data = [dataclasses.asdict(s) for s in product.sources]
    blob = json.dumps([FORMAT_VERSION, product.name, data, GIT_IDENT_NAME, GIT_IDENT_EMAIL])
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
