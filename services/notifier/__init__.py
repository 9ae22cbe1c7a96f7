"""The pull-notifier service: pulls with long polling, consumer group offsets, lookups."""

from .app import create_app
from .run import run_notifier

__all__ = ["create_app", "run_notifier"]
