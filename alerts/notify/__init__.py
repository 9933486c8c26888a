"""Alert notification: grouping, silences, inhibition, receivers and a durable outbox."""
