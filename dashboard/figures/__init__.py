"""Pure figure builders: plain data in (:mod:`dashboard.model`), a plotly figure dict out.

Nothing here reads the store, the clock or settings; every builder is unit-tested on its own.
Figures carry ``layout.meta.state`` = ``data`` | ``empty`` | ``error`` so tests (and people
reading the JSON) can tell an empty state from a drawing.
"""
