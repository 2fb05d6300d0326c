"""The server core, under every wire: the served models and each version's life, the one inference path,
batching, worker threads, statistics, metrics and tracing. Imports no wire."""
