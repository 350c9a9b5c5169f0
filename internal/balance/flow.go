package balance

import (
	"container/heap"
	"math"
)

// network is a flow network for min-cost max-flow with small non-negative integer edge costs.
// The balancer uses it once per rebalance to decide which brokers carry each topic's extra
// partitions (docs/assignment.md "How the targets are found").
//
// Edges are stored in pairs: edge e and e^1 are each other's residual reverse. A forward edge
// starts with its capacity and its reverse with 0, so the flow on a forward edge is the
// residual capacity of its reverse.
type network struct {
	edges []flowEdge
	adj   [][]int32 // adj[u] lists the edges leaving u, in insertion order (the search order)
}

type flowEdge struct {
	to   int32
	cap  int32 // residual capacity
	cost int32 // the reverse of an edge costs minus the edge
}

func newNetwork(nodes int) *network {
	return &network{adj: make([][]int32, nodes)}
}

// addEdge adds u→v with the given capacity and cost and returns its index for flowOn.
func (g *network) addEdge(u, v int, capacity, cost int32) int {
	e := len(g.edges)
	g.edges = append(g.edges, flowEdge{to: int32(v), cap: capacity, cost: cost}, flowEdge{to: int32(u), cost: -cost})
	g.adj[u] = append(g.adj[u], int32(e))
	g.adj[v] = append(g.adj[v], int32(e+1))
	return e
}

// flowOn is the flow carried by the forward edge e.
func (g *network) flowOn(e int) int32 { return g.edges[e^1].cap }

const unreachable = math.MaxInt64 / 4

// minCostMaxFlow sends the maximum flow from s to t, and among maximum flows one of least
// total cost, and returns its value. Every cost must be ≥ 0 on entry.
//
// It is the primal-dual method: Dijkstra over reduced costs (cost + pot[u] - pot[v], kept ≥ 0
// by the potentials) finds the current shortest-path length, and a Dinic blocking flow then
// saturates every shortest path at once along the zero-reduced-cost edges. Successive
// shortest paths give a min-cost flow for every flow value; doing them a whole distance at a
// time keeps the number of phases to the number of distinct path costs, which is small here
// (costs are 0 or 1 per middle edge). The search order is the insertion order of edges, so the
// result is deterministic.
func (g *network) minCostMaxFlow(s, t int) int {
	n := len(g.adj)
	pot := make([]int64, n)
	dist := make([]int64, n)
	level := make([]int32, n)
	next := make([]int, n)
	queue := make([]int32, 0, n)
	total := 0
	for {
		g.shortestPaths(s, pot, dist)
		if dist[t] >= unreachable {
			return total
		}
		// Clamping at dist[t] keeps every residual reduced cost ≥ 0, also for nodes that are
		// unreachable now but become reachable through the reverse edges the phase creates.
		for v := range pot {
			pot[v] += min(dist[v], dist[t])
		}
		for g.levels(s, t, pot, level, queue) {
			clear(next)
			for {
				f := g.augment(s, t, math.MaxInt32, pot, level, next)
				if f == 0 {
					break
				}
				total += int(f)
			}
		}
	}
}

// admissible reports whether edge e leaving u has residual capacity at zero reduced cost.
func (g *network) admissible(u int, e int32, pot []int64) bool {
	ed := &g.edges[e]
	return ed.cap > 0 && int64(ed.cost)+pot[u]-pot[ed.to] == 0
}

// shortestPaths fills dist with the reduced-cost distance from s over residual edges.
func (g *network) shortestPaths(s int, pot, dist []int64) {
	for i := range dist {
		dist[i] = unreachable
	}
	dist[s] = 0
	h := &distHeap{{node: int32(s)}}
	for h.Len() > 0 {
		it := heap.Pop(h).(distItem)
		u := int(it.node)
		if it.dist > dist[u] {
			continue
		}
		for _, e := range g.adj[u] {
			ed := &g.edges[e]
			if ed.cap == 0 {
				continue
			}
			d := dist[u] + int64(ed.cost) + pot[u] - pot[ed.to]
			if d < dist[ed.to] {
				dist[ed.to] = d
				heap.Push(h, distItem{dist: d, node: ed.to})
			}
		}
	}
}

// levels is Dinic's breadth-first layering of the admissible subgraph; it reports whether t
// is reachable.
func (g *network) levels(s, t int, pot []int64, level []int32, queue []int32) bool {
	for i := range level {
		level[i] = -1
	}
	level[s] = 0
	queue = append(queue[:0], int32(s))
	for len(queue) > 0 {
		u := int(queue[0])
		queue = queue[1:]
		for _, e := range g.adj[u] {
			to := g.edges[e].to
			if level[to] < 0 && g.admissible(u, e, pot) {
				level[to] = level[u] + 1
				queue = append(queue, to)
			}
		}
	}
	return level[t] >= 0
}

// augment pushes one path of flow (at most limit) from u to t along admissible edges that
// climb one level each, advancing next[u] past edges that are exhausted (Dinic's current-arc
// rule), and returns the amount pushed.
func (g *network) augment(u, t int, limit int32, pot []int64, level []int32, next []int) int32 {
	if u == t {
		return limit
	}
	for ; next[u] < len(g.adj[u]); next[u]++ {
		e := g.adj[u][next[u]]
		to := int(g.edges[e].to)
		if level[to] != level[u]+1 || !g.admissible(u, e, pot) {
			continue
		}
		if f := g.augment(to, t, min(limit, g.edges[e].cap), pot, level, next); f > 0 {
			g.edges[e].cap -= f
			g.edges[e^1].cap += f
			return f
		}
	}
	return 0
}

type distItem struct {
	dist int64
	node int32
}

// distHeap is a min-heap by distance, ties by node index so the order is deterministic.
type distHeap []distItem

func (h distHeap) Len() int { return len(h) }
func (h distHeap) Less(i, j int) bool {
	if h[i].dist != h[j].dist {
		return h[i].dist < h[j].dist
	}
	return h[i].node < h[j].node
}
func (h distHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *distHeap) Push(x any)   { *h = append(*h, x.(distItem)) }
func (h *distHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}
