"""The operator's HTTP endpoints: ``/healthz``, ``/readyz``, ``/metrics`` and the ``/`` landing page.

They carry no governance logic and reveal nothing per tenant: readiness names which check failed
and why in one line; the landing page says what this server is and where its endpoints are.
"""

from signoff.surfaces.ops.health import Health, ops_routes

__all__ = ["Health", "ops_routes"]
