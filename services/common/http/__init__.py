"""The HTTP services' basics: answers.py (the uniform error body, JSON answers, the common
routes), bodies.py (bounded body reads, JSON depth), server.py (serving an app with its
bounds), openapi.py (the documents each service serves), json_numbers.py, and
batch_wire.py (the binary batch bodies of POST /v1/batch and their results)."""
