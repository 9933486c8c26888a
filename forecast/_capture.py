"""Library warnings (statsmodels, numpy, pandas) are data: captured into the result, never printed.

``warnings.catch_warnings`` swaps process-global state, so two threads capturing at once (the
hourly job and an on-demand API request) could lose or misattribute warnings, or leave the
filters changed. Capturing blocks therefore hold one process-wide re-entrant lock: model fits
are CPU-bound under the GIL anyway, so serialising them costs little.
"""

from __future__ import annotations

import contextlib
import threading
import warnings
from collections.abc import Iterator

_LOCK = threading.RLock()


@contextlib.contextmanager
def captured(into: list[str], prefix: str = "") -> Iterator[None]:
    """Record every warning raised inside the block as ``"[prefix: ]Category: message"``
    (first line, at most 200 characters), without duplicates."""
    with _LOCK, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        finally:
            for w in caught:
                first = (str(w.message).strip().splitlines() or [""])[0]
                text = f"{w.category.__name__}: {first[:200]}"
                if prefix:
                    text = f"{prefix}: {text}"
                if text not in into:
                    into.append(text)
