"""Shipping samples with Prometheus remote write 1.0: encoding, a durable on-disk queue per
receiver, and the sender loop (the agent's store; see ``infermeter agent``)."""
