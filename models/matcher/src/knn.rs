//! The candidate index of one tick: searches nearest to an anchor by the CoD paper's
//! N-dimensional distance (great-circle km + weighted skill difference + input-device penalty),
//! produced lazily and exactly, with placed searches dropped as the tick goes.
//!
//! A static k-d tree over the points `(x, y, z, s)`: the point on the sphere in km and the
//! weighted skill. Each node keeps its bounding box, its live (unplaced) count and the input
//! devices under it. The walk is best-first over one heap that holds nodes under a lower bound
//! of the distance to anything inside and points under their exact distance, so a point comes
//! off the heap only when nothing left can be nearer. The bound is the 3-D distance to the box
//! (the chord, never more than the arc) plus the skill gap to the box, plus the input penalty
//! when no search under the node shares the anchor's device: tighter than one 4-D Euclidean
//! distance, and one heap instead of one walk per device.
//!
//! Not `rstar`: its iterator allocates per walk, it would need a tree per device and a merge
//! heap, and its removals rebalance. Here a placed search only lowers the live counts on its
//! path to the root, and a walk allocates one heap.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Points per leaf.
const LEAF: usize = 16;
const NIL: u32 = u32::MAX;

#[derive(Debug, Clone)]
struct Node {
    lo: [f64; 4],
    hi: [f64; 4],
    /// Children, or `NIL` for a leaf.
    left: u32,
    right: u32,
    /// A leaf's points: `pts[start..end]`.
    start: u32,
    end: u32,
    parent: u32,
    live: u32,
    /// Bit d set when a search of input device d lies under the node.
    devices: u8,
}

/// One search as the index sees it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct IndexPoint {
    /// The point on the sphere (km) and the weighted skill.
    pub coords: [f64; 4],
    /// Input device slot (0, 1 or 2).
    pub device: u8,
    pub platform: u8,
    pub crossplay: bool,
}

/// The index: build once per tick, [`KdIndex::remove`] placed searches, walk with
/// [`KdIndex::walk`]. Points are stored in leaf order, so a leaf is one contiguous run.
#[derive(Debug, Clone, Default)]
pub(crate) struct KdIndex {
    nodes: Vec<Node>,
    /// Points in leaf order, with their search indices.
    pts: Vec<IndexPoint>,
    ids: Vec<u32>,
    live: Vec<bool>,
    /// Each search's position in `pts`, and its leaf.
    pos_of: Vec<u32>,
    leaf_of: Vec<u32>,
    input_km: f64,
}

impl KdIndex {
    /// An index of `points` (search i is `points[i]`); `input_km` is the distance's input
    /// penalty.
    pub(crate) fn new(points: Vec<IndexPoint>, input_km: f64) -> KdIndex {
        let n = points.len();
        let mut ix = KdIndex {
            nodes: Vec::with_capacity(2 * n / LEAF + 2),
            pts: points,
            ids: (0..n as u32).collect(),
            live: vec![true; n],
            pos_of: vec![0; n],
            leaf_of: vec![NIL; n],
            input_km,
        };
        if n > 0 {
            ix.build(0, n, NIL);
        }
        ix.pts = ix.ids.iter().map(|&i| ix.pts[i as usize]).collect();
        for (pos, &i) in ix.ids.iter().enumerate() {
            ix.pos_of[i as usize] = pos as u32;
        }
        ix
    }

    fn build(&mut self, start: usize, end: usize, parent: u32) -> u32 {
        let (mut lo, mut hi) = ([f64::INFINITY; 4], [f64::NEG_INFINITY; 4]);
        let mut devices = 0u8;
        for &p in &self.ids[start..end] {
            let pt = &self.pts[p as usize];
            for d in 0..4 {
                lo[d] = lo[d].min(pt.coords[d]);
                hi[d] = hi[d].max(pt.coords[d]);
            }
            devices |= 1 << pt.device;
        }
        let id = self.nodes.len() as u32;
        self.nodes.push(Node {
            lo,
            hi,
            left: NIL,
            right: NIL,
            start: start as u32,
            end: end as u32,
            parent,
            live: (end - start) as u32,
            devices,
        });
        if end - start <= LEAF {
            for &p in &self.ids[start..end] {
                self.leaf_of[p as usize] = id;
            }
            return id;
        }
        // Split at the median of the widest dimension.
        let dim = (0..4)
            .max_by(|&a, &b| (hi[a] - lo[a]).total_cmp(&(hi[b] - lo[b])))
            .unwrap_or(0);
        let mid = start + (end - start) / 2;
        let pts = &self.pts;
        self.ids[start..end].select_nth_unstable_by(mid - start, |&a, &b| {
            pts[a as usize].coords[dim].total_cmp(&pts[b as usize].coords[dim])
        });
        let left = self.build(start, mid, id);
        let right = self.build(mid, end, id);
        let node = &mut self.nodes[id as usize];
        node.left = left;
        node.right = right;
        id
    }

    /// Drops point `i` from every later walk (placing it twice is harmless).
    pub(crate) fn remove(&mut self, i: usize) {
        if !std::mem::replace(&mut self.live[self.pos_of[i] as usize], false) {
            return;
        }
        let mut node = self.leaf_of[i];
        while node != NIL {
            let n = &mut self.nodes[node as usize];
            n.live -= 1;
            node = n.parent;
        }
    }

    /// A lower bound of the distance from the anchor to anything under `node`.
    fn bound(&self, node: &Node, q: &[f64; 4], dev: u8, input_km: f64) -> f64 {
        let gap = |d: usize| (node.lo[d] - q[d]).max(q[d] - node.hi[d]).max(0.0);
        let e2 = gap(0).powi(2) + gap(1).powi(2) + gap(2).powi(2);
        let skill = gap(3);
        let penalty = if node.devices & (1 << dev) == 0 {
            input_km
        } else {
            0.0
        };
        // Shaved by a few ulps, so that rounding never lifts it above an exact distance.
        (e2.sqrt() + skill + penalty) * (1.0 - 1e-12)
    }

    /// The live searches other than `anchor` that may share its lobby (same platform, or both
    /// cross-play: [`crate::queue::platforms_compatible`]), nearest first by the distance of
    /// [`IndexPoint::distance`] (ties by index).
    pub(crate) fn walk(&self, anchor: usize) -> Walk<'_> {
        self.walk_at(self.pts[self.pos_of[anchor] as usize], anchor as u32)
    }

    /// The live searches that may share a lobby with a search at point `a` (one not in the
    /// index: a lobby's centre, say), nearest first as [`KdIndex::walk`] orders them.
    pub(crate) fn walk_from(&self, a: IndexPoint) -> Walk<'_> {
        self.walk_at(a, NIL)
    }

    fn walk_at(&self, a: IndexPoint, anchor: u32) -> Walk<'_> {
        let mut heap = BinaryHeap::with_capacity(64);
        if !self.nodes.is_empty() && self.nodes[0].live > 0 {
            let b = self.bound(&self.nodes[0], &a.coords, a.device, self.input_km);
            heap.push(Reverse((key(b), NODE, 0)));
        }
        Walk {
            ix: self,
            anchor,
            a,
            heap,
        }
    }
}

impl IndexPoint {
    /// The CoD distance: great-circle km, plus the weighted skill gap, plus `input_km` when the
    /// devices differ. It repeats the operations of [`crate::queue::Distance`] on the index's
    /// own copy of the fields; `nearest_walk_equals_brute_force` fails if the two drift apart.
    pub(crate) fn distance(&self, other: &IndexPoint, input_km: f64) -> f64 {
        let (a, b) = (&self.coords, &other.coords);
        crate::geo::great_circle_km(&[a[0], a[1], a[2]], &[b[0], b[1], b[2]])
            + (a[3] - b[3]).abs()
            + if self.device == other.device {
                0.0
            } else {
                input_km
            }
    }
}

/// Heap entry kinds: at equal keys a node opens before a point comes out, so ties keep the
/// index order.
const NODE: u8 = 0;
const POINT: u8 = 1;

/// Distances are >= 0, so their bits order as the values do.
fn key(d: f64) -> u64 {
    d.max(0.0).to_bits()
}

/// See [`KdIndex::walk`].
pub(crate) struct Walk<'a> {
    ix: &'a KdIndex,
    anchor: u32,
    a: IndexPoint,
    heap: BinaryHeap<Reverse<(u64, u8, u32)>>,
}

impl Iterator for Walk<'_> {
    type Item = (f64, usize);

    fn next(&mut self) -> Option<(f64, usize)> {
        let ix = self.ix;
        let a = &self.a;
        while let Some(Reverse((k, kind, id))) = self.heap.pop() {
            if kind == POINT {
                return Some((f64::from_bits(k), id as usize));
            }
            let node = &ix.nodes[id as usize];
            if node.left == NIL {
                let range = node.start as usize..node.end as usize;
                for ((p, &j), &live) in ix.pts[range.clone()]
                    .iter()
                    .zip(&ix.ids[range.clone()])
                    .zip(&ix.live[range])
                {
                    if live
                        && j != self.anchor
                        && crate::geo::compatible(a.platform, a.crossplay, p.platform, p.crossplay)
                    {
                        let d = a.distance(p, ix.input_km);
                        self.heap.push(Reverse((key(d), POINT, j)));
                    }
                }
            } else {
                for child in [node.left, node.right] {
                    let c = &ix.nodes[child as usize];
                    if c.live > 0 {
                        let b = ix.bound(c, &a.coords, a.device, ix.input_km);
                        self.heap.push(Reverse((key(b), NODE, child)));
                    }
                }
            }
        }
        None
    }
}
