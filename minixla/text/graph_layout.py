"""A layered (Sugiyama-style) drawing of a DAG: what `minixla graph` draws SVG and HTML with.

The four classic steps, each a plain function over integer vertices:

1. **layers**: longest path from the sources, then single nodes move to the layer that
   shortens their edges most (network simplex's objective, the sum of edge spans, improved by
   local moves; each move strictly lowers it, so the loop ends);
2. **dummies**: an edge spanning k layers becomes a chain through k-1 dummy vertices, so it
   owns a slot in every layer it crosses instead of running behind the nodes there;
3. **order**: barycentre sweeps, alternately down and up, each followed by adjacent
   transpositions; the order with the fewest crossings (counted exactly, by Barth, Jünger and
   Mutzel's accumulator) wins;
4. **coordinates**: each layer's x minimizes sum(w * (x_u - x_v)**2) over its links to both
   neighbouring layers, subject to the minimum spacing of its boxes in their order; that is a
   weighted isotonic regression, solved exactly by pool-adjacent-violators. Sweeping the layers
   back and forth is block coordinate descent on one convex problem. Links between dummies
   weigh most, so long edges run straight.

An edge is then a polyline: down its source's own column to the bottom of its layer, across
each gap, straight down through each of its dummy slots, and into its target's top. Gaps hold
no boxes and a layer's slots never overlap, so no edge passes through a box it does not
connect. Edges that go against the given node order (none in verified HLO) are laid out
reversed. Nothing is random: the same graph always gets the same drawing.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise
from operator import mul

GAP_X, DUMMY_GAP_X, GAP_Y = 22.0, 4.0, 42.0  # between boxes; next to a dummy slot; layers
DUMMY_WIDTH = 12.0  # a long edge's slot in a layer it crosses
_STAY = 1e-3
_LAYER_ROUNDS, _SWEEPS, _PATIENCE, _TRANSPOSE_ROUNDS, _PLACE_ROUNDS = 32, 24, 4, 4, 24
_SIFT_MAX, _SIFT_EACH_SWEEP = 64, 300  # sifting a layer costs its size squared
_WEIGHT = {(False, False): 1.0, (False, True): 2.0, (True, False): 2.0, (True, True): 24.0}


@dataclass(frozen=True)
class Box:
    x: float  # left
    y: float  # top
    width: float
    height: float

    @property
    def right(self) -> float:
        return self.x + self.width

    @property
    def bottom(self) -> float:
        return self.y + self.height


Point = tuple[float, float]


@dataclass
class Layout:
    """Where everything goes. Vertices `0 .. len(names)-1` are the nodes, in the order given;
    the rest are dummies. `order` lists each layer's vertices left to right, top layer first,
    and `down[v]` the vertices v links to in the next layer (what `count_crossings` reads).
    All long edges out of one node share its `trunks` entry, one dummy per layer down to the
    lowest of their targets (they carry one value, like Graphviz's `concentrate`): the drawing
    stays linear in size where one value feeds users in every layer."""

    names: list[str]
    index: dict[str, int]  # name -> vertex
    edges: list[tuple[str, str]]  # as given, without repeats
    boxes: dict[str, Box]
    layer: dict[str, int]
    trunks: dict[int, list[int]]  # upper node -> its dummies, one per layer below it
    order: list[list[int]]
    down: list[list[int]]
    ranks: list[int]  # every vertex's layer
    x: list[float]  # every vertex's centre
    tops: list[float]  # every layer's top and bottom
    bottoms: list[float]
    ports: dict[tuple[int, int], float]  # (vertex, linked vertex) -> x where the link meets it
    width: float
    height: float

    def crossings(self) -> int:
        return count_crossings(self.order, self.down)

    def path(self, a: str, b: str) -> list[int]:
        """The vertices edge a -> b runs through, upper end first."""
        u, v = sorted((self.index[a], self.index[b]))
        return [u, *self.trunks.get(u, [])[: self.ranks[v] - self.ranks[u] - 1], v]

    def route(self, a: str, b: str) -> list[Point]:
        """Edge a -> b as a polyline from a's box to b's."""
        points = self.polyline(self.path(a, b))
        return points if self.index[a] < self.index[b] else points[::-1]

    def slots(self, a: str, b: str) -> list[Box]:
        return [self.slot(d) for d in self.path(a, b)[1:-1]]

    def slot(self, dummy: int) -> Box:
        rank = self.ranks[dummy]
        return Box(
            self.x[dummy] - DUMMY_WIDTH / 2,
            self.tops[rank],
            DUMMY_WIDTH,
            self.bottoms[rank] - self.tops[rank],
        )

    def polyline(self, path: list[int]) -> list[Point]:
        """Out of the first vertex's bottom, down through dummies' slots, into the last one's
        top (the bottom of its slot if that is a dummy: a trunk's end)."""
        first, last = path[0], path[-1]
        rank = self.ranks[first]
        if first < len(self.names):
            x = self.ports[first, path[1]]
            points = [(x, self.boxes[self.names[first]].bottom), (x, self.bottoms[rank])]
        else:
            points = [(self.x[first], self.bottoms[rank])]
        for d in path[1:-1]:
            rank = self.ranks[d]
            points += [(self.x[d], self.tops[rank]), (self.x[d], self.bottoms[rank])]
        rank = self.ranks[last]
        if last < len(self.names):
            points.append((self.ports[last, path[-2]], self.tops[rank]))
        else:
            points += [(self.x[last], self.tops[rank]), (self.x[last], self.bottoms[rank])]
        return [p for k, p in enumerate(points) if k == 0 or p != points[k - 1]]


def layered_layout(sizes: dict[str, tuple[float, float]], edges) -> Layout:
    """`sizes` maps node -> (width, height), operands before users; `edges` are (from, to)."""
    names = list(sizes)
    index = {name: i for i, name in enumerate(names)}
    wanted = [(a, b) for a, b in dict.fromkeys(edges) if a in index and b in index and a != b]
    pairs = list(
        dict.fromkeys((min(index[a], index[b]), max(index[a], index[b])) for a, b in wanted)
    )
    layer = assign_layers(len(names), pairs)
    widths = [sizes[name][0] for name in names]
    down: list[list[int]] = [[] for _ in names]
    up: list[list[int]] = [[] for _ in names]

    linked: set[tuple[int, int]] = set()

    def link(a: int, b: int) -> None:
        if (a, b) not in linked:
            linked.add((a, b))
            down[a].append(b)
            up[b].append(a)

    trunks: dict[int, list[int]] = {}
    for u, v in pairs:
        trunk = trunks.setdefault(u, []) if layer[v] - layer[u] > 1 else []
        for rank in range(layer[u] + 1 + len(trunk), layer[v]):
            trunk.append(len(widths))
            layer.append(rank)
            widths.append(DUMMY_WIDTH)
            down.append([])
            up.append([])
            link(trunk[-2] if len(trunk) > 1 else u, trunk[-1])
        link(trunk[layer[v] - layer[u] - 2] if trunk else u, v)
    order = order_layers(layer, up, down)
    xs = assign_x(order, widths, up, down, len(names))
    tops, heights = _bands(order, [sizes[n][1] for n in names])
    boxes = {
        n: Box(xs[i] - widths[i] / 2, tops[layer[i]], widths[i], sizes[n][1])
        for i, n in enumerate(names)
    }
    bottoms = [top + h for top, h in zip(tops, heights)]
    width = max((box.right for box in boxes.values()), default=0.0)
    return Layout(
        names,
        index,
        wanted,
        boxes,
        {n: layer[i] for i, n in enumerate(names)},
        {u: t for u, t in trunks.items() if t},
        order,
        down,
        layer,
        xs,
        tops,
        bottoms,
        _ports(xs, widths, up, down, len(names)),
        width,
        bottoms[-1] if bottoms else 0.0,
    )


# -- 1. layers ---------------------------------------------------------------------------------
def assign_layers(count: int, edges: list[tuple[int, int]]) -> list[int]:
    """A layer per vertex (every edge u -> v has u < v and ends up spanning at least one layer).

    Longest path first; then a vertex with more outgoing than incoming edges moves down as far
    as its users allow (and the other way round), which shortens its edges in total."""
    preds: list[list[int]] = [[] for _ in range(count)]
    succs: list[list[int]] = [[] for _ in range(count)]
    for u, v in edges:
        preds[v].append(u)
        succs[u].append(v)
    layer = [0] * count
    for v in range(count):
        layer[v] = max((layer[p] + 1 for p in preds[v]), default=0)
    for _ in range(_LAYER_ROUNDS):
        moved = False
        for v in reversed(range(count)):
            balance = len(succs[v]) - len(preds[v])
            if balance > 0:
                want = min(layer[s] for s in succs[v]) - 1
            elif balance < 0:
                want = max(layer[p] + 1 for p in preds[v])
            else:
                continue
            moved |= want != layer[v]
            layer[v] = want
        if not moved:
            break
    rank = {value: i for i, value in enumerate(sorted(set(layer)))}  # drop emptied layers
    return [rank[value] for value in layer]


# -- 3. order ----------------------------------------------------------------------------------
def order_layers(layer: list[int], up, down) -> list[list[int]]:
    """Per layer, a vertex order with few crossings: the best seen over sweeps begun from the
    creation order and from its mirror image, first down from the top and then up from the
    bottom (one start alone gets stuck in local minima often enough to see)."""
    rows: list[list[int]] = [[] for _ in range(max(layer, default=-1) + 1)]
    for v, rank in enumerate(layer):
        rows[rank].append(v)
    best, fewest = rows, None
    for mirror, downwards in ((False, True), (True, True), (False, False), (True, False)):
        order = [row[::-1] if mirror else row[:] for row in rows]
        crossings = _reduce_crossings(order, up, down, downwards)
        if fewest is None or crossings < fewest:
            best, fewest = order, crossings
        if fewest == 0:
            break
    return best


def _reduce_crossings(order, up, down, downwards: bool) -> int:
    """Barycentre sweeps from `order`, which ends as the best order seen; returns its crossings."""
    pos = _positions(order, len(up))
    first = range(1, len(order)) if downwards else range(len(order) - 2, -1, -1)
    for rank in first:  # a first sweep replaces the starting order
        _sort_by_barycentre(order[rank], up if downwards else down, pos, False)
    _transpose(order, up, down, pos, False)
    best, fewest, stale = [row[:] for row in order], count_crossings(order, down), 0
    for sweep in range(_SWEEPS):
        if fewest == 0 or stale >= _PATIENCE:
            break
        flip = sweep % 4 >= 2  # every other pair of sweeps breaks ties the other way round
        if (sweep % 2 == 0) == downwards:
            for rank in range(len(order) - 2, -1, -1):
                _sort_by_barycentre(order[rank], down, pos, flip)
        else:
            for rank in range(1, len(order)):
                _sort_by_barycentre(order[rank], up, pos, flip)
        if len(up) <= _SIFT_EACH_SWEEP:
            _sift(order, up, down, pos)
        _transpose(order, up, down, pos, flip)
        crossings = count_crossings(order, down)
        if crossings < fewest:
            best, fewest, stale = [row[:] for row in order], crossings, 0
        else:
            stale += 1
    order[:] = best
    if fewest and len(up) > _SIFT_EACH_SWEEP:  # big graphs: sift the best order only
        pos = _positions(order, len(up))
        _sift(order, up, down, pos)
        _transpose(order, up, down, pos, False)
        fewest = count_crossings(order, down)
    return fewest


def _positions(order, count: int) -> list[int]:
    pos = [0] * count
    for row in order:
        for i, v in enumerate(row):
            pos[v] = i
    return pos


def _sort_by_barycentre(row: list[int], fixed, pos: list[int], flip: bool) -> None:
    """Sorts `row` by the mean position of each vertex's neighbours in the fixed layer;
    vertices without any keep their places. Ties keep the current order, or reverse it with
    `flip` (a way out of plateaus, as in Graphviz's dot)."""
    movable = [v for v in row if fixed[v]]
    key = {
        v: (sum(pos[n] for n in fixed[v]) / len(fixed[v]), -pos[v] if flip else pos[v])
        for v in movable
    }
    movable.sort(key=key.__getitem__)
    it = iter(movable)
    row[:] = [next(it) if fixed[v] else v for v in row]
    for i, v in enumerate(row):
        pos[v] = i


def _transpose(order, up, down, pos: list[int], ties: bool) -> None:
    """Swaps neighbours in a layer while that removes crossings (only theirs change); with
    `ties`, also where it leaves their crossings as many (but some)."""
    for _ in range(_TRANSPOSE_ROUNDS):
        improved = False
        for row in order:
            ends = _ends(row, up, down, pos)
            for i in range(len(row) - 1):
                u, v = row[i], row[i + 1]
                now, swapped = _pair_crossings(ends[u], ends[v]), _pair_crossings(ends[v], ends[u])
                if swapped < now or (ties and 0 < swapped == now):
                    row[i], row[i + 1] = v, u
                    pos[u], pos[v] = i + 1, i
                    improved |= swapped < now
        if not improved:
            return


def _sift(order, up, down, pos: list[int]) -> None:
    """Moves each vertex of a small layer to the place in it where its edges cross least
    (escapes the local minima that sweeps and swaps of neighbours get stuck in)."""
    for row in order:
        if not 2 < len(row) <= _SIFT_MAX:
            continue
        ends = _ends(row, up, down, pos)
        for v in list(row):
            here = row.index(v)
            others = row[:here] + row[here + 1 :]
            before = [_pair_crossings(ends[w], ends[v]) for w in others]
            after = [_pair_crossings(ends[v], ends[w]) for w in others]
            cost = now = sum(after)
            best, fewest = 0, cost
            for k in range(len(others)):
                cost += before[k] - after[k]  # v now goes after others[k]
                if k + 1 == here:
                    now = cost
                if cost < fewest:
                    best, fewest = k + 1, cost
            if fewest < now:
                row[:] = others[:best] + [v] + others[best:]
                for i, w in enumerate(row):
                    pos[w] = i


def _ends(row, up, down, pos) -> dict[int, tuple[list[int], list[int]]]:
    """Each vertex's neighbours' positions above and below, sorted (moving vertices within
    `row` changes none of them)."""
    return {v: (sorted(pos[n] for n in up[v]), sorted(pos[n] for n in down[v])) for v in row}


def _pair_crossings(left, right) -> int:
    """Crossings between the edges of two vertices of one layer, `left` drawn first, given
    their `_ends`: pairs whose left end lies right of the right one's, above and below."""
    total = 0
    for firsts, seconds in zip(left, right):
        j = 0
        for value in firsts:
            while j < len(seconds) and seconds[j] < value:
                j += 1
            total += j
    return total


def count_crossings(order: list[list[int]], down) -> int:
    """Edge crossings between consecutive layers: inversions among the lower ends of the edges
    taken in upper-end order, counted with a Fenwick tree (Barth, Jünger and Mutzel, 2004)."""
    pos = _positions(order, len(down))
    total = 0
    for upper, lower in pairwise(order):
        tree = [0] * (len(lower) + 1)
        seen = 0
        for u in upper:
            for p in sorted(pos[v] for v in down[u]):
                i, at_most = p + 1, 0
                while i > 0:
                    at_most += tree[i]
                    i -= i & -i
                total += seen - at_most
                seen += 1
                i = p + 1
                while i <= len(lower):
                    tree[i] += 1
                    i += i & -i
    return total


# -- 4. coordinates ----------------------------------------------------------------------------
def assign_x(order, widths, up, down, real: int) -> list[float]:
    """Box centres: packed to the left first, then layer by layer (down, up, down, ...) the
    exact best positions given both neighbouring layers, until nothing moves by half a point."""
    links = [(*up[v], *down[v]) for v in range(len(widths))]
    weights = [[_WEIGHT[v >= real, n >= real] for n in links[v]] for v in range(len(widths))]
    offsets = [_offsets(row, widths, real) for row in order]
    xs = [0.0] * len(widths)
    for row, row_offsets in zip(order, offsets):
        for v, offset in zip(row, row_offsets):
            xs[v] = offset
    ranks = list(range(len(order)))
    for round_ in range(_PLACE_ROUNDS):
        moved = 0.0
        for rank in ranks if round_ % 2 == 0 else reversed(ranks):
            moved = max(moved, _place_row(order[rank], offsets[rank], xs, links, weights))
        if moved < 0.5:
            break
    left = min((xs[v] - widths[v] / 2 for v in range(len(xs))), default=0.0)
    return [x - left for x in xs]


def _offsets(row, widths, real: int) -> list[float]:
    """Each centre's least distance from the first one's, given the boxes' order and sizes."""
    offsets = [0.0]
    for a, b in pairwise(row):
        gap = GAP_X if a < real and b < real else DUMMY_GAP_X
        offsets.append(offsets[-1] + (widths[a] + widths[b]) / 2 + gap)
    return offsets


def _place_row(row, offsets, xs, links, weights) -> float:
    """Pool-adjacent-violators on y_i = x_i - offset_i, which must not decrease along the row."""
    sums: list[float] = []
    totals: list[float] = []
    sizes: list[int] = []  # the blocks: weighted sum of y, weight, vertex count
    for v, offset in zip(row, offsets):
        weight = _STAY + sum(weights[v])  # a light pull to stay put, for lone vertices
        total = _STAY * xs[v] + sum(map(mul, weights[v], map(xs.__getitem__, links[v])))
        total, size = total - weight * offset, 1
        while sums and sums[-1] * weight > total * totals[-1]:  # the mean of y would fall
            total, weight, size = total + sums.pop(), weight + totals.pop(), size + sizes.pop()
        sums.append(total)
        totals.append(weight)
        sizes.append(size)
    moved, i = 0.0, 0
    for total, weight, size in zip(sums, totals, sizes):
        mean = total / weight
        for v in row[i : i + size]:
            x = mean + offsets[i]
            moved = max(moved, abs(x - xs[v]))
            xs[v] = x
            i += 1
    return moved


# -- routes ------------------------------------------------------------------------------------
def _bands(order, heights) -> tuple[list[float], list[float]]:
    """Each layer's top and height (its tallest box; dummies have none)."""
    tops, band_heights, y = [], [], 0.0
    for row in order:
        height = max((heights[v] for v in row if v < len(heights)), default=0.0)
        tops.append(y)
        band_heights.append(height)
        y += height + GAP_Y
    return tops, band_heights


def _ports(xs, widths, up, down, real: int) -> dict[tuple[int, int], float]:
    """Where each link meets a box: spread along its top or bottom in the other ends' x order,
    so edges into one node do not all meet in a point."""
    ports = {}
    for v in range(len(xs)):
        for links in (up[v], down[v]):
            ends = sorted(links, key=lambda n: (xs[n], n))
            for k, n in enumerate(ends):
                if v >= real:
                    ports[v, n] = xs[v]
                else:
                    ports[v, n] = xs[v] - widths[v] / 2 + widths[v] * (k + 1) / (len(ends) + 1)
    return ports
