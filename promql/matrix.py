"""A range query's intermediate values: an instant vector at every step, as one array.

Row i of a :class:`Matrix` is one label set; ``values[i, k]`` is its value at step k where
``present[i, k]``. Labels belong to rows, so label work (dropping the name, matching, grouping)
is done once per row instead of once per row and step. Two rows may carry the same labels
(``or`` of two selectors, ``label_replace``) as long as they are never present at the same
step; :func:`to_series` merges them and refuses a clash as Prometheus does.

A scalar over a range is a plain float array with one value per step.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from promql.lexer import ExprError
from promql.vector import Labels, Vector
from store.flat_runs import starts_of
from store.types import Float64Array, Int64Array

StepScalar = Float64Array  # one value per step


@dataclass(slots=True)
class Matrix:
    labels: list[Labels]
    values: Float64Array  # [rows, steps]
    present: np.ndarray  # [rows, steps] bool

    @classmethod
    def empty(cls, steps: int) -> Matrix:
        return cls([], np.empty((0, steps)), np.zeros((0, steps), bool))

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def steps(self) -> int:
        return int(self.values.shape[1])

    def column(self, k: int) -> Vector:
        """The instant vector at step k. When every row is present, the label list is this
        matrix's own object, so per-list memos of the instant functions hit at every step."""
        have = self.present[:, k]
        if have.all():
            return Vector(self.labels, self.values[:, k])
        rows = np.flatnonzero(have)
        return Vector([self.labels[i] for i in rows.tolist()], self.values[rows, k])

    def rows(self, index: Int64Array) -> Matrix:
        return Matrix([self.labels[i] for i in index.tolist()], self.values[index], self.present[index])

    def with_labels(self, labels: list[Labels]) -> Matrix:
        return Matrix(labels, self.values, self.present)


def from_columns(columns: Sequence[Vector | None], steps: int) -> Matrix:
    """Assemble per-step vectors (None: nothing at that step) into rows by label set; a label
    set twice in one step's vector is refused as in a range query's result."""
    row_of: dict[Labels, int] = {}
    cells: list[tuple[int, int, float]] = []
    for k, vec in enumerate(columns):
        if vec is None:
            continue
        for labels, v in zip(vec.labels, vec.values.tolist()):
            row = row_of.get(labels)
            if row is None:
                row = row_of[labels] = len(row_of)
            cells.append((row, k, v))
    values = np.full((len(row_of), steps), np.nan)
    present = np.zeros((len(row_of), steps), bool)
    if cells:
        rows, cols, vals = zip(*cells)
        r, c = np.asarray(rows, np.int64), np.asarray(cols, np.int64)
        if len(np.unique(r * steps + c)) != len(r):
            raise ExprError("vector cannot contain metrics with the same labelset", 0)
        values[r, c] = vals
        present[r, c] = True
    return Matrix(list(row_of), values, present)


def per_step(fn: Callable[[int], Vector | None], steps: int, deadline: Callable[[], None] | None) -> Matrix:
    """``fn(k)`` at every step, assembled into a matrix."""
    columns = []
    for k in range(steps):
        if deadline is not None:
            deadline()
        columns.append(fn(k))
    return from_columns(columns, steps)


def group_rows(keys: Sequence[Labels]) -> tuple[Int64Array, list[Labels], Int64Array, Int64Array]:
    """Rows grouped by key: (group id of each row, the distinct keys in first-seen order, the
    rows ordered by group, where each group begins in that order)."""
    seen: dict[Labels, int] = {}
    ids = np.fromiter((seen.setdefault(key, len(seen)) for key in keys), np.int64, len(keys))
    order = np.argsort(ids, kind="stable")
    return ids, list(seen), order, starts_of(np.bincount(ids, minlength=len(seen)))


def merge_duplicates(m: Matrix) -> Matrix:
    """Rows with the same labels joined into one; two present at one step is an error."""
    ids, keys, order, begins = group_rows(m.labels)
    if len(keys) == len(m.labels):
        return m
    sorted_present = m.present[order]
    clash = np.add.reduceat(sorted_present.astype(np.int64), begins, axis=0) > 1
    if clash.any():
        raise ExprError("vector cannot contain metrics with the same labelset", 0)
    values = np.full((len(keys), m.steps), np.nan)
    present = np.zeros((len(keys), m.steps), bool)
    rows, cols = np.nonzero(m.present)
    values[ids[rows], cols] = m.values[rows, cols]
    present[ids[rows], cols] = True
    return Matrix(keys, values, present)


@dataclass(frozen=True)
class Series:
    labels: Labels
    ts_ms: Int64Array
    values: Float64Array


def to_series(value: Matrix | StepScalar, times: Int64Array) -> list[Series]:
    """A range query's result: one series per label set with its points, sorted by labels (a
    scalar: one series without labels, every step)."""
    if not isinstance(value, Matrix):
        return [Series((), times.copy(), np.asarray(value, np.float64))]
    merged = merge_duplicates(value)
    out = []
    for i in sorted(range(len(merged)), key=lambda r: merged.labels[r]):
        have = merged.present[i]
        if have.any():
            out.append(Series(merged.labels[i], times[have], merged.values[i, have]))
    return out
