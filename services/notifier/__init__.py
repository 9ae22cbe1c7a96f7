"""The pull-notifier service: pulls with long polling, consumer group offsets, lookups."""

from mqstore.services.notifier.app import create_app
from mqstore.services.notifier.run import run_notifier

__all__ = ["create_app", "run_notifier"]
