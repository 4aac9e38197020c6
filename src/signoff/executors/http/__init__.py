"""The declarative HTTP executor: a manifest's ``executor.http`` block as one bounded request.

- ``executor.py``: ``HttpExecutor`` — the request, its timeouts and size limits, redaction.
- ``template.py``: ``{{ input.x }}`` references in URLs, headers and bodies.
- ``response.py``: how a response maps to a stable result (``ResponseSpec``).
"""
