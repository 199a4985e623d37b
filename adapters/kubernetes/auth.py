"""Who is calling the planner's API, asked of the cluster: TokenReview and SubjectAccessReview.

:class:`KubeReviewer` is what ``auth.mode: kubernetes`` uses (``planner.service.auth.
ReviewAuthorizer`` wraps it with its cache): ``review(token)`` asks the API server whose bearer
token it is (``authentication.k8s.io/v1`` TokenReview; ``None`` when it is not valid, e.g.
expired, or bound to another audience); ``allowed(user, groups, role)`` asks whether that user
may ``use`` the resource ``roles`` of API group ``group`` (default ``planner.llm``) named
``role`` (``authorization.k8s.io/v1`` SubjectAccessReview). The Helm chart's ClusterRoles
``<release>-reader``/``-operator``/``-admin`` grant exactly that; bind them to users or service
accounts. The planner's own ServiceAccount needs ``create`` on ``tokenreviews`` and
``subjectaccessreviews`` (the chart grants it in this mode).

Errors: the client's (``SourceTemporaryError`` when the API server cannot be reached,
``SourcePermanentError`` for RBAC problems).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from adapters.kubernetes.client import KubeApi

ROLES_RESOURCE = "roles"
ROLE_VERB = "use"


class KubeReviewer:
    """TokenReview / SubjectAccessReview over a ``kubernetes.client.ApiClient``."""

    def __init__(
        self,
        api_client: Any,
        *,
        group: str = "planner.llm",
        audiences: Sequence[str] = (),
        request_timeout_s: float = 5.0,
    ) -> None:
        self.api = KubeApi(api_client, request_timeout_s=request_timeout_s)
        self.group = group
        self.audiences = list(audiences)

    def review(self, token: str) -> tuple[str, list[str]] | None:
        """``(username, groups)`` of ``token``, or None when the cluster does not accept it."""
        spec: dict[str, Any] = {"token": token}
        if self.audiences:
            spec["audiences"] = self.audiences
        answer = self.api.create_token_review(
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": spec}
        )
        status = answer.get("status") or {}
        user = status.get("user") or {}
        name = user.get("username")
        if not status.get("authenticated") or not isinstance(name, str) or not name:
            return None
        groups = [g for g in user.get("groups") or [] if isinstance(g, str)]
        return name, groups

    def allowed(self, user: str, groups: list[str], role: str) -> bool:
        """Whether ``user`` (in ``groups``) may ``use`` ``roles.<group>`` named ``role``."""
        answer = self.api.create_subject_access_review(
            {
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SubjectAccessReview",
                "spec": {
                    "user": user,
                    "groups": groups,
                    "resourceAttributes": {
                        "group": self.group,
                        "resource": ROLES_RESOURCE,
                        "verb": ROLE_VERB,
                        "name": role,
                    },
                },
            }
        )
        return bool((answer.get("status") or {}).get("allowed"))
