"""A DAG whose nodes are merged one pair at a time, with a maintained topological order
(Pearce and Kelly's dynamic topological order; XLA's ``GraphCycles`` does the same), for
the fusion pass's question "may groups ``a`` and ``b`` become one?".

Merging ``a`` and ``b`` keeps the graph acyclic exactly when no path of two or more edges
joins them. With ``rank`` a topological order and ``rank[a] < rank[b]``, such a path runs
forward from ``a`` through nodes ranked below ``b`` only, so the search never leaves the
interval between the two: its cost is the part of the graph between them that ``a``
reaches, not the whole program. After a merge the order is repaired within the same
interval: the nodes that reach ``b`` from inside it move before the merged node, the
nodes ``a`` reaches move after it, and no other node's rank changes.

    >>> g = DynamicOrder(4, [(0, 1), (1, 2), (0, 2), (2, 3)])
    >>> g.merge(0, 2)   # 0 -> 1 -> 2: merging 0 and 2 would make a cycle through 1
    False
    >>> g.merge(1, 2)
    True
    >>> g.merge(0, 1)   # now 0 -> {1, 2} only
    True
    >>> sorted(g.succ[0])
    [3]
"""

from __future__ import annotations

from collections.abc import Iterable

SCAN = 16  # spine ops a certificate looks at before it leaves the question to a search


class DynamicOrder:
    """Nodes ``0..n-1`` and their edges; ``merge(keep, drop)`` contracts two nodes into
    ``keep`` unless that makes a cycle. ``visited`` counts the work the checks cost
    (edges the searches looked at and moved, nodes reordered, one per spine
    certificate), which the complexity tests read."""

    def __init__(self, n: int, edges: Iterable[tuple[int, int]]) -> None:
        self.rank = list(range(n))  # the caller's node order must be topological
        self.succ: list[set[int]] = [set() for _ in range(n)]
        self.pred: list[set[int]] = [set() for _ in range(n)]
        for u, v in edges:
            if u != v:
                self.succ[u].add(v)
                self.pred[v].add(u)
        self.spine = Spine(self.succ, self.pred)
        self.visited = 0

    def merge(self, keep: int, drop: int) -> bool:
        """Contract ``drop`` into ``keep`` (edges of both become ``keep``'s) and return
        True, unless a path of two or more edges joins them (then nothing changes and it
        returns False)."""
        x, y = (keep, drop) if self.rank[keep] < self.rank[drop] else (drop, keep)
        if self.spine.joins(x, y):
            self.visited += 1
            return False
        done = self._race(x, y)
        if done is None:
            return False
        rank = self.rank
        if done.edges is self.succ:  # all that x reaches before y is known
            after = list(done.seen)
            lo = min((rank[u] for u in after), default=rank[y])
            before = self._finish(y, x, self.pred, lo, rank[y]) if after else []
            end = rank[y]
        else:  # all that reaches y after x is known
            before = list(done.seen)
            hi = max((rank[u] for u in before), default=rank[x])
            after = self._finish(x, y, self.succ, rank[x], hi) if before else []
            end = rank[x]
        self.visited += len(before) + len(after)  # the reorder
        self._reorder(keep, before, after, end)
        self._absorb(keep, drop)
        self.spine.merge(keep, drop)
        return True

    def _walk(self, start: int, end: int, edges: list[set[int]], lo: int,
              hi: int) -> _Walk:
        return _Walk(start, end, edges, self.rank, lo, hi)

    def _finish(self, start: int, end: int, edges: list[set[int]], lo: int,
                hi: int) -> list[int]:
        """All nodes on one side (a search that cannot reach ``end``)."""
        w = self._walk(start, end, edges, lo, hi)
        while not w.step():
            pass
        self.visited += w.steps
        return list(w.seen)

    def _race(self, x: int, y: int) -> _Walk | None:
        """Search forward from ``x`` and backward from ``y``, one node at a time each,
        through the nodes ranked between them; the search that ends first (it found
        everything on its side), or None if either found a path of two or more edges."""
        lo, hi = self.rank[x], self.rank[y]
        walks = (self._walk(x, y, self.succ, lo, hi), self._walk(y, x, self.pred, lo, hi))
        try:
            while True:
                for w in walks:
                    if w.step():
                        return w
        except _Joined:
            return None
        finally:
            self.visited += walks[0].steps + walks[1].steps

    def _reorder(self, keep: int, before: list[int], after: list[int], end: int) -> None:
        """Rank ``keep`` (the merged node) after ``before`` (nodes that reach it from
        inside the interval) and before ``after`` (nodes it reaches inside it), out of
        the ranks these nodes hold and ``end``: the rank of the end of the interval
        whose side was searched completely."""
        rank = self.rank
        pool = sorted([end] + [rank[u] for u in before] + [rank[u] for u in after])
        order = sorted(before, key=rank.__getitem__) + [keep] \
            + sorted(after, key=rank.__getitem__)
        for u, r in zip(order, pool, strict=True):
            rank[u] = r

    def _absorb(self, keep: int, drop: int) -> None:
        """Move ``drop``'s edges to ``keep``."""
        self.visited += len(self.succ[drop]) + len(self.pred[drop])
        for s in self.succ[drop]:
            self.pred[s].discard(drop)
            if s != keep:
                self.pred[s].add(keep)
                self.succ[keep].add(s)
        for p in self.pred[drop]:
            self.succ[p].discard(drop)
            if p != keep:
                self.succ[p].add(keep)
                self.pred[keep].add(p)
        self.succ[drop], self.pred[drop] = set(), set()
        self.rank[drop] = -1


class _Joined(Exception):
    """A search reached the other end: a path of two or more edges joins the two."""


class _Walk:
    """A depth-first search from ``start`` along ``edges`` (``succ``: forward, ``pred``:
    backward) without the direct edge to ``end``, through nodes ranked strictly between
    ``lo`` and ``hi`` only; ``step`` expands one node (raises ``_Joined`` on reaching
    ``end``) and returns True once nothing is left; ``steps`` counts the edges it
    looked at."""

    __slots__ = ("edges", "end", "rank", "lo", "hi", "stack", "seen", "steps")

    def __init__(self, start: int, end: int, edges: list[set[int]], rank: list[int],
                 lo: int, hi: int) -> None:
        self.edges, self.end, self.rank, self.lo, self.hi = edges, end, rank, lo, hi
        self.stack = [s for s in edges[start] if lo < rank[s] < hi]
        self.seen = set(self.stack)
        self.steps = len(edges[start])  # edges looked at

    def step(self) -> bool:
        if not self.stack:
            return True
        rank, lo, hi, seen = self.rank, self.lo, self.hi, self.seen
        edges = self.edges[self.stack.pop()]
        self.steps += len(edges)
        for s in edges:
            if s == self.end:
                raise _Joined
            if s not in seen and lo < rank[s] < hi:
                seen.add(s)
                self.stack.append(s)
        return False


class Spine:
    """A longest path of the initial graph, which certifies most long paths at once: a
    node that reaches spine position ``a`` and a node reached from position ``b >= a``
    are joined through the spine's ops ``a..b``, by two edges or more if one of those
    ops is in neither node. (Merging nodes only adds paths, so what held for the
    initial graph still holds; a merged node keeps the best of both ends.)"""

    def __init__(self, succ: list[set[int]], pred: list[set[int]]) -> None:
        n = len(succ)
        depth = [0] * n
        for u in range(n):  # the node order is topological
            depth[u] = 1 + max((depth[p] for p in pred[u]), default=-1)
        path: list[int] = []
        u = max(range(n), key=depth.__getitem__, default=-1)
        while u >= 0:
            path.append(u)
            u = next((p for p in pred[u] if depth[p] == depth[u] - 1), -1)
        self.ops = path[::-1]
        pos = {u: i for i, u in enumerate(self.ops)}
        self.first = [n] * n  # the first spine position each node reaches
        self.last = [-1] * n  # the last spine position that reaches each node
        for u in reversed(range(n)):
            self.first[u] = min([pos.get(u, n)] + [self.first[s] for s in succ[u]])
        for u in range(n):
            self.last[u] = max([pos.get(u, -1)] + [self.last[p] for p in pred[u]])
        self.size = [1] * n
        self.parent = list(range(n))

    def find(self, u: int) -> int:
        """The node that initial node ``u`` was merged into."""
        parent = self.parent
        while parent[u] != u:
            parent[u] = parent[parent[u]]
            u = parent[u]
        return u

    def joins(self, x: int, y: int) -> bool:
        """True if the spine shows a path of two or more edges from ``x`` to ``y``
        (False: it does not tell)."""
        a, b = self.first[x], self.last[y]
        if a > b:
            return False
        if b - a + 1 > self.size[x] + self.size[y]:
            return True  # the ops a..b cannot all be in x or y
        ends = {x, y}
        return any(self.find(u) not in ends for u in self.ops[a:min(b + 1, a + SCAN)])

    def merge(self, keep: int, drop: int) -> None:
        self.first[keep] = min(self.first[keep], self.first[drop])
        self.last[keep] = max(self.last[keep], self.last[drop])
        self.size[keep] += self.size[drop]
        self.parent[drop] = keep
