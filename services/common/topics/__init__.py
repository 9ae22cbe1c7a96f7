"""Topics as every door sees them: rules.py (system topics, `%RETRY%`/`%DLQ%`, the topics
file watcher) and queue_choice.py (round robin per topic for messages that name no queue)."""
