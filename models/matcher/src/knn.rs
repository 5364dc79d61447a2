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
//! Why not `rstar` (used before): its iterator allocates per walk, needed a tree per device and
//! a merge heap, and its removals rebalance; together they were about half of a 10,000-search
//! tick. Here a placed search only lowers the live counts on its path to the root, and a walk
//! allocates one heap.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Points per leaf (8, 16 and 32 measured alike on the 10,000-search tick; 4 was slower).
const LEAF: usize = 16;
const NIL: u32 = u32::MAX;

#[derive(Debug, Clone)]
struct Node {
    lo: [f64; 4],
    hi: [f64; 4],
    /// Children, or `NIL` for a leaf.
    left: u32,
    right: u32,
    /// A leaf's points: `order[start..end]`.
    start: u32,
    end: u32,
    parent: u32,
    live: u32,
    /// Bit d set when a search of input device d lies under the node.
    devices: u8,
}

/// The index: build once per tick, [`KdIndex::remove`] placed searches, walk with
/// [`KdIndex::walk`].
#[derive(Debug, Clone, Default)]
pub(crate) struct KdIndex {
    nodes: Vec<Node>,
    order: Vec<u32>,
    /// Each point's leaf.
    leaf_of: Vec<u32>,
    coords: Vec<[f64; 4]>,
    device: Vec<u8>,
    live: Vec<bool>,
}

impl KdIndex {
    /// An index of `coords[i]` (sphere km, weighted skill) with input device slot `device[i]`
    /// (0, 1 or 2).
    pub(crate) fn new(coords: Vec<[f64; 4]>, device: Vec<u8>) -> KdIndex {
        let n = coords.len();
        let mut ix = KdIndex {
            nodes: Vec::with_capacity(2 * n / LEAF + 2),
            order: (0..n as u32).collect(),
            leaf_of: vec![NIL; n],
            coords,
            device,
            live: vec![true; n],
        };
        if n > 0 {
            ix.build(0, n, NIL);
        }
        ix
    }

    fn build(&mut self, start: usize, end: usize, parent: u32) -> u32 {
        let (mut lo, mut hi) = ([f64::INFINITY; 4], [f64::NEG_INFINITY; 4]);
        let mut devices = 0u8;
        for &p in &self.order[start..end] {
            let c = &self.coords[p as usize];
            for d in 0..4 {
                lo[d] = lo[d].min(c[d]);
                hi[d] = hi[d].max(c[d]);
            }
            devices |= 1 << self.device[p as usize];
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
            for &p in &self.order[start..end] {
                self.leaf_of[p as usize] = id;
            }
            return id;
        }
        // Split at the median of the widest dimension.
        let dim = (0..4)
            .max_by(|&a, &b| (hi[a] - lo[a]).total_cmp(&(hi[b] - lo[b])))
            .unwrap_or(0);
        let mid = start + (end - start) / 2;
        let coords = &self.coords;
        self.order[start..end].select_nth_unstable_by(mid - start, |&a, &b| {
            coords[a as usize][dim].total_cmp(&coords[b as usize][dim])
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
        if !std::mem::replace(&mut self.live[i], false) {
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

    /// The live points other than `anchor` that `keep` accepts, nearest first by `exact`
    /// (ties by index). `exact(j)` must never be below the bound: the chord of the first three
    /// coordinates, plus the skill gap, plus `input_km` when the devices differ.
    pub(crate) fn walk<'a, K, E>(
        &'a self,
        anchor: usize,
        input_km: f64,
        keep: K,
        exact: E,
    ) -> Walk<'a, K, E>
    where
        K: Fn(usize) -> bool,
        E: Fn(usize) -> f64,
    {
        let mut heap = BinaryHeap::with_capacity(64);
        if !self.nodes.is_empty() && self.nodes[0].live > 0 {
            let b = self.bound(
                &self.nodes[0],
                &self.coords[anchor],
                self.device[anchor],
                input_km,
            );
            heap.push(Reverse((key(b), NODE, 0)));
        }
        Walk {
            ix: self,
            anchor,
            input_km,
            keep,
            exact,
            heap,
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
pub(crate) struct Walk<'a, K, E> {
    ix: &'a KdIndex,
    anchor: usize,
    input_km: f64,
    keep: K,
    exact: E,
    heap: BinaryHeap<Reverse<(u64, u8, u32)>>,
}

impl<K, E> Iterator for Walk<'_, K, E>
where
    K: Fn(usize) -> bool,
    E: Fn(usize) -> f64,
{
    type Item = (f64, usize);

    fn next(&mut self) -> Option<(f64, usize)> {
        let ix = self.ix;
        let q = &ix.coords[self.anchor];
        let dev = ix.device[self.anchor];
        while let Some(Reverse((k, kind, id))) = self.heap.pop() {
            if kind == POINT {
                return Some((f64::from_bits(k), id as usize));
            }
            let node = &ix.nodes[id as usize];
            if node.left == NIL {
                for &p in &ix.order[node.start as usize..node.end as usize] {
                    let j = p as usize;
                    if j != self.anchor && ix.live[j] && (self.keep)(j) {
                        self.heap.push(Reverse((key((self.exact)(j)), POINT, p)));
                    }
                }
            } else {
                for child in [node.left, node.right] {
                    let c = &ix.nodes[child as usize];
                    if c.live > 0 {
                        let b = ix.bound(c, q, dev, self.input_km);
                        self.heap.push(Reverse((key(b), NODE, child)));
                    }
                }
            }
        }
        None
    }
}
