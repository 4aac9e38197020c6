"""The tamper-evident audit trail outside the store: signing keys, checkpoints, verification
and export (``docs/audit.md``). The hashing rule itself is ``signoff.core.chain``."""
