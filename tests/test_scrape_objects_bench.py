"""benchmarks.scrape_objects: what the scrape path keeps per series, by stage, stays within the
bounds measured when the parser, the mapper and the scrape loop stopped keeping second copies
(before: parser 776, mapping 686, scrape loop 259 bytes a series at this size)."""

from __future__ import annotations

from benchmarks.scrape_objects import STAGES, measure


def test_the_scrape_path_keeps_no_second_copy_of_each_series() -> None:
    held = measure(targets=4, series=500)
    assert set(held) == {name for _, name in STAGES} | {"other", "total"}
    assert 300 < held["parser cache and body layout"] < 550  # the layout's prefixes, not the text maps too
    assert 300 < held["canonical mapping plans"] < 520  # no dedupe or alias group interned per series
    assert 60 < held["scrape loop (target labels)"] < 180  # no raw -> labelled map, no key set
    assert held["series keys (raw, canonical, labelled)"] > 200
