"""The layout's size and typing rules, kept from issue 46 on: no module over 400 lines, at
most 9 functions over 60 lines, and `dict[str, Any]` returned only by serialisers (named
to_json / as_dict / details_json, or listed in docs/layout.md) and at most a documented
number of others. Fast: the source is parsed, nothing runs."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "regtrack"
LAYOUT = ROOT / "docs" / "layout.md"
SECTION = "## Functions that return dict[str, Any]: serialisers"
SERIALISER_NAMES = {"to_json", "as_dict", "details_json"}
MAX_MODULE_LINES = 400
LONG_FUNCTION_LINES = 60
MAX_LONG_FUNCTIONS = 9


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _functions(path: Path) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    tree = ast.parse(path.read_text(), filename=str(path))
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]


def _returns_any_dict(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    if function.returns is None:
        return False
    text = ast.unparse(function.returns).replace(" ", "").strip("'\"")
    return text in ("dict[str,Any]", "Dict[str,Any]", "dict[str,typing.Any]")


def _any_dict_functions() -> set[tuple[str, str]]:
    """(module path from the root, function name) of every function annotated so."""
    return {
        (str(path.relative_to(ROOT)), f.name)
        for path in _modules()
        for f in _functions(path)
        if _returns_any_dict(f)
    }


def _documented() -> tuple[set[tuple[str, str]], int]:
    """The serialisers docs/layout.md lists, and its ceiling for the others."""
    text = LAYOUT.read_text()
    assert SECTION in text, f"docs/layout.md has no {SECTION!r} section"
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    listed = set()
    for line in section.splitlines():
        if line.startswith("- `"):
            names = line.split(":", 1)[0]
            path, *functions = re.findall(r"`([^`]+)`", names)
            listed |= {(path, name) for name in functions}
    ceiling = re.search(r"at most (\d+)\.", section)
    assert ceiling, "docs/layout.md states no ceiling ('at most N.') for the others"
    return listed, int(ceiling[1])


def test_dict_any_is_returned_by_serialisers_and_at_most_the_documented_others():
    found = _any_dict_functions()
    listed, ceiling = _documented()
    assert listed, "the list of serialisers is empty: was the section's format changed?"
    gone = sorted(listed - found)
    assert not gone, f"listed in docs/layout.md but no longer returning dict[str, Any]: {gone}"
    others = sorted((p, n) for p, n in found - listed if n not in SERIALISER_NAMES)
    assert len(others) <= ceiling, (
        f"{len(others)} functions return dict[str, Any] (docs/layout.md allows {ceiling}): "
        f"return a record, or list a serialiser with its reason: {others}"
    )


def test_no_module_is_over_400_lines():
    sizes = {str(p.relative_to(ROOT)): len(p.read_text().splitlines()) for p in _modules()}
    over = {path: n for path, n in sizes.items() if n > MAX_MODULE_LINES}
    assert not over, f"split these along a seam (one job per module): {over}"
    assert len(sizes) > 100, "regtrack's modules were not found"


def test_at_most_9_functions_are_over_60_lines():
    long = sorted(
        (f"{path.relative_to(ROOT)}:{f.name}", f.end_lineno - f.lineno + 1)
        for path in _modules()
        for f in _functions(path)
        if f.end_lineno is not None and f.end_lineno - f.lineno + 1 > LONG_FUNCTION_LINES
    )
    assert len(long) <= MAX_LONG_FUNCTIONS, f"{len(long)} functions over 60 lines: {long}"
