"""A server's role (a single server, a node of a cluster with holdings, a node of a fleet) and
all of its code: ``role.py`` chooses it and says what a role is asked."""
