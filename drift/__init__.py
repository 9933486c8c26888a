"""Version and environment drift across the nodes of a group: the rules and the table."""
