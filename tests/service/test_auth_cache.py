"""The Kubernetes token reviews' cache: an answer is reused for ``cache_s`` seconds, the
cache holds at most ``max_entries`` answers (the least recently used go first), and a refusal
is cached as an answer is."""

from __future__ import annotations

import pytest

from planner.service.auth import AuthError, Principal, ReviewAuthorizer, Role


def test_token_reviews_are_cached_for_a_while_and_bounded() -> None:
    asked: list[str] = []
    now = [0.0]

    def review(token: str) -> tuple[str, list[str]] | None:
        asked.append(token)
        return None if token == "bad" else (f"user-{token}", ["team"])

    authorizer = ReviewAuthorizer(
        review, lambda *_: True, cache_s=60.0, max_entries=2, clock=lambda: now[0]
    )
    assert authorizer.authorize("a", Role.READER) == Principal("user-a", Role.READER)
    assert authorizer.authorize("a", Role.READER) == Principal("user-a", Role.READER)
    assert asked == ["a"]
    for _ in range(2):
        with pytest.raises(AuthError) as refused:
            authorizer.authorize("bad", Role.READER)
        assert refused.value.status == 401
    assert asked == ["a", "bad"]
    authorizer.authorize("b", Role.READER)  # a third answer: the least recently used goes
    authorizer.authorize("b", Role.READER)
    authorizer.authorize("a", Role.READER)
    assert asked == ["a", "bad", "b", "a"]
    now[0] = 61.0  # past cache_s: asked again
    authorizer.authorize("a", Role.READER)
    assert asked == ["a", "bad", "b", "a", "a"]
