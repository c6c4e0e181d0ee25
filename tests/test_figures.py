"""Charts never draw a cell without a valid trial as if it were measured."""

from __future__ import annotations

import pandas as pd

from regtrack.output.report import figures

CELLS = pd.DataFrame(
    [
        {"point": "pipeline=1", "point_order": 0, "target": "a", "value": 100.0, "min": 90.0,
         "max": 110.0, "n_valid": 0, "trusted": False, "problems": ["client-bound (2x)"]},
        {"point": "pipeline=10", "point_order": 1, "target": "a", "value": 300.0, "min": 290.0,
         "max": 310.0, "n_valid": 2, "trusted": True, "problems": []},
    ]
)  # fmt: skip


def test_an_unmeasured_cell_is_a_labelled_marker_outside_the_line():
    line, marker = figures.by_point(CELLS, "t", "ops/s", ["a"])["data"]
    assert line["name"] == "a" and line["y"] == [None, 300.0]
    assert marker["name"] == "a: no valid trial" and marker["y"] == [100.0]
    assert marker["mode"] == "markers" and marker["text"] == ["client-bound (2x)"]


def test_latency_lines_leave_unmeasured_cells_out_too():
    data = figures.latency(CELLS, CELLS.iloc[0:0], ["a"])["data"]
    assert [t["name"] for t in data] == ["a p50", "a p50: no valid trial"]
    assert data[0]["y"] == [None, 300.0]
