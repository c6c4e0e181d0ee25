"""The loops that plan, measure, analyse and decide again: ci's gate, run until decided,
bisect, resume and the union of shards; and what the report shows, derived from the
store. Above bench (which only measures) and analysis (which only computes), so each of
those stays one job."""
