"""``LinkStore`` over ``signoff_approval_links``: one row per issued decision link.

Only the SHA-256 of a link's token is stored. Redeeming is one conditional ``UPDATE`` (unused and
unexpired), so of any number of concurrent redeemers exactly one sees a row change.
"""

from __future__ import annotations

import json
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from signoff.core.ports import ApprovalLink
from signoff.store.sql.tables import approval_links


class SqlLinkStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def issue(self, link: ApprovalLink) -> None:
        row = {
            "token_hash": link.token_hash,
            "run_id": link.run_id,
            "run_version": link.run_version,
            "tenant_id": link.tenant_id,
            "approver_id": link.approver_id,
            "approver_roles": json.dumps(list(link.approver_roles)),
            "issued_at": link.issued_at,
            "expires_at": link.expires_at,
            "used_at": link.used_at,
        }
        async with self._engine.begin() as conn:
            await conn.execute(sa.insert(approval_links), row)

    async def get(self, token_hash: str) -> ApprovalLink | None:
        query = sa.select(approval_links).where(approval_links.c.token_hash == token_hash)
        async with self._engine.connect() as conn:
            row = (await conn.execute(query)).mappings().first()
            await conn.rollback()
        if row is None or row["token_hash"] != token_hash:
            return None
        try:
            roles = json.loads(row["approver_roles"])
        except ValueError:
            return None
        if not isinstance(roles, list) or not all(isinstance(r, str) for r in roles):
            return None
        return ApprovalLink(
            token_hash=row["token_hash"],
            run_id=row["run_id"],
            run_version=row["run_version"],
            tenant_id=row["tenant_id"],
            approver_id=row["approver_id"],
            approver_roles=tuple(roles),
            issued_at=row["issued_at"],
            expires_at=row["expires_at"],
            used_at=row["used_at"],
        )

    async def redeem(self, token_hash: str, now: datetime) -> bool:
        statement = (
            sa.update(approval_links)
            .where(
                approval_links.c.token_hash == token_hash,
                approval_links.c.used_at.is_(None),
                approval_links.c.expires_at > now,
            )
            .values(used_at=now)
        )
        async with self._engine.begin() as conn:
            changed = (await conn.execute(statement)).rowcount
        return changed == 1

    async def purge(self, older_than: datetime) -> int:
        statement = sa.delete(approval_links).where(approval_links.c.expires_at < older_than)
        async with self._engine.begin() as conn:
            return (await conn.execute(statement)).rowcount
