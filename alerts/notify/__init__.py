"""Alert notification: grouping, silences, inhibition, receivers and a durable outbox.

Entry point: :class:`alerts.notify.service.Notifier` (built once by the composition root);
HTTP: :func:`alerts.notify.api.silences_router`; config: :class:`alerts.notify.config.NotifyConfig`.

Modules, upstream to downstream: ``config`` → ``matchers`` / ``routing`` / ``inhibit`` /
``silences`` → ``dedup`` (pure decision) → ``payloads`` (pure rendering) → ``groups`` (what the
pipeline holds) → ``pipeline`` (grouping, timing, one transaction per tick into ``outbox``) →
``dispatcher`` (claims, sends through ``sinks``, retries, probes of failing receivers) — with ``state`` and ``schema`` for what survives a restart.
This package imports nothing heavy at import time so that ``schema`` stays cheap for Alembic.
"""
