"""A small invoices domain for the demo (``signoff.demo.invoices``): its own SQLite tables, executors and a guard.

The database file comes from ``SIGNOFF_DEMO_INVOICES_DB`` (default ``demo-invoices.db`` in the
working directory); each tenant gets a few sample invoices the first time it touches the table.
"""
