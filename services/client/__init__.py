"""`mqstore.client`: Python producer and consumer for the mqstore services."""
