"""RPC surface: the Flight SQL server, its authentication, configuration and error boundary."""
