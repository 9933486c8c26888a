"""Who may do what: principals and roles, API tokens (stored hashed), OIDC bearer tokens, the
route policy every request passes, rate limits per principal, and the append-only audit log."""
