"""Plumbing shared by the three services: config file, logs, HTTP basics, metrics."""
