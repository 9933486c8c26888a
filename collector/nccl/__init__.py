"""NCCL / PyTorch-distributed log collection: pure line parsers plus a file-following Source.

Parsers (each ``parse_line(line) -> event | None``, ``parse_lines(lines) -> Parsed``; none raises):
:mod:`~collector.nccl.debug_lines` (``NCCL_DEBUG`` INFO/WARN lines), :mod:`~collector.nccl.watchdog`
(ProcessGroupNCCL watchdog timeouts), :mod:`~collector.nccl.inspector` (NCCL Inspector JSON lines),
:mod:`~collector.nccl.nccl_tests` (``*_perf`` result tables). :mod:`~collector.nccl.metrics` turns
events into series; :class:`NcclLogSource` follows files and implements ``Source``.
"""

from collector.nccl.lines import parse_any
from collector.nccl.metrics import NcclAggregator
from collector.nccl.source import NcclLogSource

__all__ = ["NcclAggregator", "NcclLogSource", "parse_any"]
