"""One entry point for a line of any supported format (logs often interleave them)."""

from __future__ import annotations

from collector.nccl import debug_lines, engine_lines, inspector, nccl_tests, watchdog
from collector.nccl.debug_lines import DebugEvent
from collector.nccl.engine_lines import EngineLineEvent
from collector.nccl.inspector import InspectorPerf
from collector.nccl.nccl_tests import PerfEvent
from collector.nccl.watchdog import WatchdogEvent

Event = DebugEvent | WatchdogEvent | InspectorPerf | PerfEvent | EngineLineEvent


def parse_any(line: str) -> Event | None:
    """Try each parser, cheapest discriminator first; ``None`` means the line is ignored."""
    if "NCCL " in line:
        event: Event | None = debug_lines.parse_line(line)
        if event is not None:
            return event
    if engine_lines.may_match(line):
        found = engine_lines.parse_line(line)
        if found is not None:
            return found
    if watchdog.may_match(line):
        event = watchdog.parse_line(line)
        if event is not None:
            return event
    stripped = line.lstrip()
    if stripped.startswith("{"):
        return inspector.parse_line(stripped)
    return nccl_tests.parse_line(line)
