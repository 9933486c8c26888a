"""Mixture-of-experts routing: balance figures, the default rules over them, and the readers of
engines' expert-routing counts."""
