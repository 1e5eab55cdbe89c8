"""A DAG whose nodes are merged one pair at a time, with a maintained topological order
(a dynamic topological order in the manner of Pearce and Kelly; XLA's ``GraphCycles``
does the same), for the fusion pass's question "may groups ``a`` and ``b`` become one?".

Merging ``a`` and ``b`` keeps the graph acyclic exactly when no path of two or more edges
joins them. With a topological order where ``a`` comes first, such a path runs forward
from ``a`` through nodes ordered before ``b`` only, so no search leaves the interval
between the two. Two searches race through it, forward from ``a`` and backward from
``b``; the first to run out of nodes without meeting the other end proves the merge safe,
and what it found is all that moves: the nodes ``a`` reaches go right after ``b``'s place,
where the merged node stands (or the nodes that reach ``b`` right before ``a``'s place).
Most long paths never need a search: a longest path of the initial graph (``Spine``)
certifies them at once. The order is a linked list with integer labels (``OrderList``),
so a node moves in O(log n) amortized time, without renumbering the others.

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

from collections.abc import Collection, Iterable, Iterator, Sequence

SCAN = 16  # spine ops a certificate looks at before it leaves the question to a search
LABEL_BITS = 62  # labels of the order are below 2**LABEL_BITS
DENSITY = 1.5  # a window of 2**i labels is relabeled when it holds < (2 / DENSITY)**i nodes


class DynamicOrder:
    """Nodes ``0..n-1`` (in a topological order) and their edges; ``merge(keep, drop)``
    contracts two nodes into ``keep`` unless that makes a cycle. ``visited`` counts the
    work the checks cost (edges the searches looked at or moved, nodes moved, one per
    spine certificate, labels rewritten), which the complexity tests read."""

    def __init__(self, n: int, edges: Iterable[tuple[int, int]]) -> None:
        self.succ: list[set[int]] = [set() for _ in range(n)]
        self.pred: list[set[int]] = [set() for _ in range(n)]
        for u, v in edges:
            if u != v:
                self.succ[u].add(v)
                self.pred[v].add(u)
        self.order = OrderList(n)
        self.spine = Spine(self.succ, self.pred)
        self.visited = 0

    @property
    def rank(self) -> list[int]:
        """Each node's label: increasing along the order (dropped nodes: stale)."""
        return self.order.label

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
        moved = sorted(done.seen, key=self.rank.__getitem__)
        self.visited += len(moved)
        for u in moved:
            self.order.remove(u)
        forward = done.edges is self.succ
        self.order.take_place(keep, y if forward else x, drop)
        if forward:  # all that x reaches before y: right after the merged node
            self.order.insert_after(keep, moved)
        else:  # all that reaches y after x: right before it
            self.order.insert_before(keep, moved)
        self._absorb(keep, drop)
        self.spine.merge(keep, drop)
        self.visited += self.order.relabeled
        self.order.relabeled = 0
        return True

    def _race(self, x: int, y: int) -> _Walk | None:
        """Search forward from ``x`` and backward from ``y``, one node at a time each,
        through the nodes ordered between them; the search that ends first (it found
        everything on its side), or None if either found a path of two or more edges."""
        rank = self.rank
        lo, hi = rank[x], rank[y]
        walks = (_Walk(x, y, self.succ, rank, lo, hi), _Walk(y, x, self.pred, rank, lo, hi))
        try:
            while True:
                for w in walks:
                    if w.step():
                        return w
        except _Joined:
            return None
        finally:
            self.visited += walks[0].steps + walks[1].steps

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


class _Joined(Exception):
    """A search reached the other end: a path of two or more edges joins the two."""


class _Walk:
    """A depth-first search from ``start`` along ``edges`` (``succ``: forward, ``pred``:
    backward) without the direct edge to ``end``, through nodes labeled strictly between
    ``lo`` and ``hi`` only. ``step`` looks at one edge (raises ``_Joined`` on reaching
    ``end``) and returns True once nothing is left, so two searches racing pay for the
    edges of the shorter side only, however many edges their ends have; ``steps``
    counts the edges looked at."""

    __slots__ = ("edges", "end", "rank", "lo", "hi", "stack", "seen", "steps", "todo",
                 "direct")

    def __init__(self, start: int, end: int, edges: list[set[int]], rank: list[int],
                 lo: int, hi: int) -> None:
        self.edges, self.end, self.rank, self.lo, self.hi = edges, end, rank, lo, hi
        self.stack: list[int] = []
        self.seen: set[int] = set()
        self.steps = 0
        self.todo: Iterator[int] | None = iter(edges[start])  # edges of the node expanded
        self.direct = True  # expanding start: its edge to end is the merge itself

    def step(self) -> bool:
        while self.todo is not None or self.stack:
            if self.todo is None:
                self.todo = iter(self.edges[self.stack.pop()])
            for s in self.todo:
                self.steps += 1
                if s == self.end and not self.direct:
                    raise _Joined
                if s not in self.seen and self.lo < self.rank[s] < self.hi:
                    self.seen.add(s)
                    self.stack.append(s)
                return False
            self.todo, self.direct = None, False
        return True


class OrderList:
    """Nodes in a doubly linked list, each with an integer label that increases along
    the list (order maintenance: Bender, Cole, Demaine, Farach-Colton and Zito, 2002).
    Labels start evenly spread below ``2**LABEL_BITS``; a node put where its neighbours'
    labels leave no room gets room by relabeling the smallest aligned window of labels
    around it that is sparse enough, which costs O(log n) amortized per insertion.
    ``relabeled`` counts the labels rewritten."""

    def __init__(self, n: int) -> None:
        gap = (1 << LABEL_BITS) // (n + 1)
        self.label = [(i + 1) * gap for i in range(n)]
        self.prev = list(range(-1, n - 1))
        self.next = list(range(1, n + 1))
        if n:
            self.next[-1] = -1
        self.relabeled = 0

    def remove(self, u: int) -> None:
        p, q = self.prev[u], self.next[u]
        if p >= 0:
            self.next[p] = q
        if q >= 0:
            self.prev[q] = p

    def take_place(self, u: int, at: int, other: int) -> None:
        """``u`` where ``at`` is (``at`` is ``u`` or ``other``); ``other`` leaves."""
        if at != u:
            self.remove(u)
            p, q = self.prev[at], self.next[at]
            self.prev[u], self.next[u], self.label[u] = p, q, self.label[at]
            if p >= 0:
                self.next[p] = u
            if q >= 0:
                self.prev[q] = u
        else:
            self.remove(other)

    def insert_after(self, a: int, run: list[int]) -> None:
        """Put the nodes of ``run`` (removed before), in order, right after ``a``."""
        self._link(run, a, self.next[a])

    def insert_before(self, b: int, run: list[int]) -> None:
        """Put the nodes of ``run`` (removed before), in order, right before ``b``."""
        self._link(run, self.prev[b], b)

    def _link(self, run: list[int], a: int, b: int) -> None:
        if not run:
            return
        for p, q in zip([a, *run], [*run, b], strict=True):
            if p >= 0:
                self.next[p] = q
            if q >= 0:
                self.prev[q] = p
        lo = self.label[a] if a >= 0 else 0
        hi = self.label[b] if b >= 0 else 1 << LABEL_BITS
        k = len(run)
        if hi - lo > k:
            for j, u in enumerate(run):
                self.label[u] = lo + (hi - lo) * (j + 1) // (k + 1)
            return
        for u in run:
            self.label[u] = lo  # (equal labels, spread below)
        self._spread(run[0])

    def _spread(self, u: int) -> None:
        """Relabel evenly the smallest window ``[base, base + 2**i)`` holding ``u``'s
        label whose nodes are fewer than ``(2 / DENSITY)**i``."""
        label, first, last, count = self.label, u, u, 1
        for i in range(1, LABEL_BITS + 1):
            base = label[u] >> i << i
            end = base + (1 << i)
            while self.prev[first] >= 0 and label[self.prev[first]] >= base:
                first, count = self.prev[first], count + 1
            while self.next[last] >= 0 and label[self.next[last]] < end:
                last, count = self.next[last], count + 1
            if count < (2 / DENSITY) ** i:
                break
        step = (end - base) // count
        node = first
        for j in range(count):
            label[node] = base + j * step
            node = self.next[node]
        self.relabeled += count


class Spine:
    """A longest path of the initial graph, which certifies most long paths at once: a
    node that reaches spine position ``a`` and a node reached from position ``b >= a``
    are joined through the spine's ops ``a..b``, by two edges or more if one of those
    ops is in neither node. (Merging nodes only adds paths, so what held for the
    initial graph still holds; a merged node keeps the best of both ends.)"""

    def __init__(self, succ: Sequence[Collection[int]], pred: Sequence[Collection[int]]
                 ) -> None:
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
