"""Opening a directory: recovery's decision table and scan, and the read-only scrub
behind `mqstore inspect` and `mqstore verify`."""
