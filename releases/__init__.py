"""Deploy and config-change markers, and the before/after comparison of a release."""
