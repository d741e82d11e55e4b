"""A team's people: the first start (setup), invites by link, roles, and deactivating accounts."""
