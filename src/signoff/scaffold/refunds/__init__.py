"""The refunds domain: the code the manifests in ``manifests/`` name (``refunds.executors``)."""
