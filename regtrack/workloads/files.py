"""Workload files: found by name or path, parsed and validated before anything runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from regtrack.core.errors import BadInput
from regtrack.core.settings import config_dirs, one_line, read_toml
from regtrack.workloads.model import KINDS, Workload


def find_workload(name_or_path: str, config_dir: Path | None = None) -> Path:
    candidate = Path(name_or_path)
    if candidate.suffix == ".toml" or "/" in name_or_path:
        if not candidate.is_file():
            raise BadInput(f"workload file {name_or_path} does not exist")
        return candidate
    for d in config_dirs(config_dir):
        path = d / "workloads" / f"{name_or_path}.toml"
        if path.is_file():
            return path
    known = sorted(list_workloads(config_dir))
    raise BadInput(
        f"unknown workload {name_or_path!r}: known workloads are {', '.join(known) or 'none'} "
        "(or give a path to a .toml file)"
    )


def list_workloads(config_dir: Path | None = None) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for d in reversed(config_dirs(config_dir)):
        for path in sorted((d / "workloads").glob("*.toml")):
            found[path.stem] = path
    return found


def load_workload(name_or_path: str, config_dir: Path | None = None, **overrides: Any) -> Workload:
    path = find_workload(name_or_path, config_dir)
    data = read_toml(path)
    data.setdefault("name", path.stem)
    data.update({k: v for k, v in overrides.items() if v is not None})
    kind = data.get("kind", "")
    model = KINDS.get(kind) if isinstance(kind, str) else None
    if model is None:
        raise BadInput(
            f"{path}: field 'kind': {data.get('kind')!r} is not a workload kind; use "
            '"get-pipeline", "mix" or "lifecycle" (docs/workloads.md)'
        )
    try:
        return model(**data)
    except ValidationError as exc:
        raise BadInput(f"{path}: {one_line(exc)}") from None
