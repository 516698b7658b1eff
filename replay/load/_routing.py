"""Several replicas as one target: which server each request goes to.

A fleet is measured as it is served, so a run may load several servers
(``run --target A --target B``). The choice is made where the client's prefix
cache model sees each request (:meth:`FleetCache.observe`, right before the send),
because that model must be per replica: a prefix cached on one server does not
help a request sent to another.

Routing ``affinity`` (the default): a session instance (its cache scope, which
its subagents share) is pinned, at its first request, to the replica with the
fewest sessions alive then (ties: fewest sessions given so far, then the lowest
index). Every turn then lands where its prefix is cached, as a session-sticky
router does; least-loaded rather than a hash of the session id because a load
test knows its load exactly: with a few users per replica a hash leaves replicas
unevenly loaded by chance (8 users on 2 replicas: 6 or more on one about 29% of
the time), and the fleet's numbers would depend on that luck. It is stateful per
process; ``--workers`` split users evenly, each worker balancing its share.

Routing ``round-robin``: each request to the next replica in turn, whatever its
session (the prefix cache of a turn's previous turns is usually elsewhere).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

import numpy as np

from replay.client import CacheMark, Hashed, PrefixCacheModel, StreamOutcome

__all__ = ["FleetCache", "Routing"]

Routing = Literal["affinity", "round-robin"]


class FleetCache(PrefixCacheModel):
    """One :class:`~replay.client.PrefixCacheModel` per replica, and the routing:
    the mark :meth:`observe` returns names the replica (``CacheMark.replica``)."""

    def __init__(self, block_size: int, replicas: int, routing: Routing) -> None:
        super().__init__(block_size)
        if replicas < 1:
            raise ValueError("replicas must be at least 1")
        self.routing = routing
        self.caches = [PrefixCacheModel(block_size) for _ in range(replicas)]
        self.alive = [0] * replicas
        """Session instances pinned to each replica and not ended (affinity)."""
        self.given = [0] * replicas
        """Session instances (affinity) or requests (round robin) sent to each."""
        self._pinned: dict[object, int] = {}
        self._next = 0

    def replica_for(self, scope: object) -> int:
        """The replica this scope's next request goes to (pins it under affinity)."""
        if self.routing == "round-robin":
            k = self._next
            self._next = (k + 1) % len(self.caches)
            self.given[k] += 1
            return k
        k = self._pinned.get(scope, -1)
        if k < 0:
            k = min(range(len(self.caches)), key=lambda r: (self.alive[r], self.given[r], r))
            self._pinned[scope] = k
            self.alive[k] += 1
            self.given[k] += 1
        return k

    def observe(self, prompt: np.ndarray, shared_tokens: int, scope: object,
                hashed: Hashed | None = None, owner: StreamOutcome | None = None) -> CacheMark:
        k = self.replica_for(scope)
        mark = self.caches[k].observe(prompt, shared_tokens, scope, hashed, owner)
        return replace(mark, replica=k)

    def extend(self, mark: CacheMark, output_ids: list[int] | np.ndarray) -> None:
        self.caches[mark.replica].extend(mark, output_ids)

    def end_scope(self, scope: object) -> None:
        for cache in self.caches:
            cache.end_scope(scope)
        k = self._pinned.pop(scope, -1)
        if k >= 0:
            self.alive[k] -= 1
