"""Tests of alert notification: grouping, silences, inhibition, outbox delivery, receivers."""
