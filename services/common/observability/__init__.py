"""What a service tells its operators: logs.py (JSON lines, one per event) and metrics.py
(the Prometheus registry per app, gauges read at scrape time)."""
