"""Price book, GPU-hour + energy + overhead cost, cost per token, budgets (built on `store`)."""
