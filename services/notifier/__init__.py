"""pull-notifier: pulls with long polling, lookups and consumer-group offsets."""
