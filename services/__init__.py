"""mqstore's services: the `mqstore` CLI now; the writer, indexer and notifier services next.

Everything here sits above `mqstore.storage` and may use HTTP, asyncio and metrics.
"""
