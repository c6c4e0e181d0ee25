"""Talking to GitHub over HTTP (api.py): I/O with one outside service, kept apart from
output/, which only formats (the comment's body is output/github_comment.py)."""
