"""``GET /v1/audit``: the audit trail (``planner.service.audit``): every write the planner made
to a scheduler and every upload it accepted, newest first. Role ``operator``."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query

from planner.service.api.access import Access
from planner.service.api.errors import error_responses
from planner.service.api.models import AuditPage, AuditRecord
from planner.service.auth import Role
from planner.service.store import Store

#: Most records one answer holds.
MAX_AUDIT_PAGE = 1000


def make_router(store: Store, access: Access) -> APIRouter:
    """The audit route over ``store``."""
    router = APIRouter(tags=["audit"], dependencies=[Depends(access.require(Role.OPERATOR))])

    @router.get(
        "/v1/audit",
        operation_id="list_audit",
        summary="Audit trail: scheduler writes and accepted uploads (who, what, why)",
        response_model=AuditPage,
        responses=error_responses(401, 403, 422, 503),
    )
    def list_audit(
        limit: int = Query(100, ge=1, le=MAX_AUDIT_PAGE, description="Records to return"),
        action: str | None = Query(
            None, max_length=32, description="Only this action, e.g. time_limit"
        ),
    ) -> AuditPage:
        rows = store.audit(limit=limit, action=action)
        return AuditPage(
            records=[AuditRecord.model_validate(r, from_attributes=True) for r in rows]
        )

    return router
