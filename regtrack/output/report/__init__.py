"""HTML reports people browse: the runs, each run's charts and tables, and history pages.

Presentation only (plan -> run -> store -> analyse -> present): every number on a page
comes from ``analysis`` or ``history``; nothing here starts a server or measures.
"""

from regtrack.output.report.render import ReportFiles, write_report

__all__ = ["ReportFiles", "write_report"]
