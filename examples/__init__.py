"""Example domain code the demo manifests point at (``examples.invoices``)."""
