"""infermeter: the composition root (settings, CLI, HTTP API, wiring of every part)."""

__version__ = "0.1.0"
