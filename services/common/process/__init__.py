"""How a service process runs: lifecycle.py (start, signals, graceful stop), loops.py
(uvloop or asyncio), parent_death.py (a child of `mqstore up` stops with it),
local_ports.py (the ports `mqstore up` uses)."""
