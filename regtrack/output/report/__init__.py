"""HTML reports people browse: the runs, each run's charts and tables, and history pages.

Presentation only (plan -> run -> store -> analyse -> present): every number on a page
comes from what flows/report.py derived (analysis.report_data); nothing here opens the
database, computes a number or measures.
"""

from regtrack.output.report.render import ReportFiles, write_report

__all__ = ["ReportFiles", "write_report"]
