//! The builder's node arena for one thread: nodes kept as first-child /
//! next-sibling links, and the child lookup every entry makes (a per-node
//! "last hit" cache, then a short sibling list, then, for nodes with many
//! children, a hash map keyed by (parent, method)).

use crate::profile::{Latency, Recal};
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::hash::{BuildHasherDefault, Hasher};

/// No node (links end here).
pub(super) const NONE: u32 = u32::MAX;
/// Children of a node are found by walking a sibling list up to this many;
/// beyond, a per-thread hash map keyed by (parent, method) is used.
const WIDE: u32 = 8;

/// Builder-side node, the part every entry reads: the tree is kept as
/// first-child / next-sibling links so creating a child never reallocates
/// a per-node vector, and its call count. 32 bytes, two to a cache line:
/// finding the child an entry goes to reads a few of these, and on a large
/// tree each read may miss the cache (the figures a node adds up on
/// exits and samples are in a [`BNode`] apart).
#[derive(Clone, Debug)]
pub(super) struct Link {
    pub(super) method: u32,
    pub(super) first_child: u32,
    pub(super) next_sibling: u32,
    /// The child found by the last lookup (loops call the same method again).
    pub(super) last_hit: u32,
    /// The sibling looked up right after this node the last time its
    /// parent called this one (a method calls its callees in the same order
    /// call after call, and a loop body calls each of them in turn).
    pub(super) next_hit: u32,
    pub(super) nchildren: u32,
    pub(super) calls: u64,
}

impl Link {
    pub(super) fn new(method: u32) -> Link {
        Link {
            method,
            first_child: NONE,
            next_sibling: NONE,
            last_hit: NONE,
            next_hit: NONE,
            nchildren: 0,
            calls: 0,
        }
    }
}

/// Builder-side node, the figures an exit, a sample or a root exit adds
/// to (same index as its [`Link`]). Under sampled timing an exit adds
/// nothing here unless the thread waited for the profiler.
#[derive(Clone, Debug, Default)]
pub(super) struct BNode {
    pub(super) total: u64,
    pub(super) adjust: u64,
    pub(super) incomplete: u64,
    pub(super) recal: Recal,
    pub(super) samples: u64,
    pub(super) sampled: u64,
    pub(super) latency: Option<Box<Latency>>,
    pub(super) allocs: Vec<crate::profile::Alloc>,
    pub(super) owners: Vec<crate::profile::Owned>,
    pub(super) sampled_allocs: Vec<crate::profile::SampledAllocs>,
}

/// Multiplicative hasher for the (parent, method) keys of wide nodes.
#[derive(Default, Clone, Copy)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    fn write_u64(&mut self, v: u64) {
        // A multiply alone leaves the low bits (the bucket index) depending
        // on the key's low bits only, i.e. on the method id: fold the high
        // half (the parent) in before and after (splitmix64's mixer).
        let mut x = (self.0 ^ v).wrapping_add(0x9E37_79B9_7F4A_7C15);
        x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        self.0 = x ^ (x >> 31);
    }
}

type WideMap = HashMap<u64, u32, BuildHasherDefault<KeyHasher>>;

#[inline]
fn wide_key(parent: u32, method: u32) -> u64 {
    ((parent as u64) << 32) | method as u64
}

/// One thread's nodes: node 0 is a sentinel whose children are the root
/// contexts.
#[derive(Clone, Debug)]
pub(super) struct Arena {
    pub(super) links: Vec<Link>,
    /// Each node's figures, parallel to `links`.
    pub(super) nodes: Vec<BNode>,
    wide: WideMap,
}

impl Arena {
    /// The sentinel alone, with room for `capacity` nodes.
    pub(super) fn with_capacity(capacity: usize) -> Arena {
        let mut links = Vec::with_capacity(capacity.max(1));
        let mut nodes = Vec::with_capacity(capacity.max(1));
        links.push(Link::new(NONE));
        nodes.push(BNode::default());
        Arena {
            links,
            nodes,
            wide: WideMap::default(),
        }
    }

    /// Appends `method` as the only child of the node added last (the
    /// chain of frames a reset keeps), counted as one incomplete call.
    pub(super) fn push_open(&mut self, method: u32) -> u32 {
        let id = self.links.len() as u32;
        let parent = &mut self.links[id as usize - 1];
        parent.first_child = id;
        parent.last_hit = id;
        parent.nchildren = 1;
        let mut l = Link::new(method);
        l.calls = 1;
        self.links.push(l);
        self.nodes.push(BNode {
            incomplete: 1,
            ..BNode::default()
        });
        id
    }

    /// The child of `parent` for `method`, created when missing: the child
    /// the parent called last, or the one called after it last time, or
    /// found by [`Arena::child_slow`].
    #[inline(always)]
    pub(super) fn child(&mut self, parent: u32, method: u32) -> u32 {
        let hint = self.links[parent as usize].last_hit;
        if hint == NONE {
            return self.child_slow(parent, method);
        }
        let h = &self.links[hint as usize];
        if h.method == method {
            return hint;
        }
        let next = h.next_hit;
        if next != NONE && self.links[next as usize].method == method {
            self.links[parent as usize].last_hit = next;
            return next;
        }
        let c = self.child_slow(parent, method);
        self.links[hint as usize].next_hit = c;
        c
    }

    #[inline(never)]
    fn child_slow(&mut self, parent: u32, method: u32) -> u32 {
        let p = &self.links[parent as usize];
        let c = if p.nchildren <= WIDE {
            let mut c = p.first_child;
            while c != NONE && self.links[c as usize].method != method {
                c = self.links[c as usize].next_sibling;
            }
            if c == NONE {
                c = self.new_child(parent, method);
                if self.links[parent as usize].nchildren == WIDE + 1 {
                    // the list just got too long: index every child
                    let mut k = c;
                    while k != NONE {
                        let n = &self.links[k as usize];
                        self.wide.insert(wide_key(parent, n.method), k);
                        k = n.next_sibling;
                    }
                }
            }
            c
        } else {
            // one probe of the map whether the child exists or not
            match self.wide.entry(wide_key(parent, method)) {
                Entry::Occupied(o) => *o.get(),
                Entry::Vacant(v) => {
                    let id = self.links.len() as u32;
                    v.insert(id);
                    let created = self.new_child(parent, method);
                    debug_assert_eq!(created, id);
                    id
                }
            }
        };
        self.links[parent as usize].last_hit = c;
        c
    }

    /// Appends a node for `method` as the first child of `parent`.
    fn new_child(&mut self, parent: u32, method: u32) -> u32 {
        let id = self.links.len() as u32;
        let mut n = Link::new(method);
        n.next_sibling = self.links[parent as usize].first_child;
        self.links.push(n);
        self.nodes.push(BNode::default());
        let p = &mut self.links[parent as usize];
        p.first_child = id;
        p.nchildren += 1;
        id
    }

    /// Children of builder node `b` in creation order.
    pub(super) fn children_of(&self, b: u32) -> Vec<u32> {
        let mut v = Vec::with_capacity(self.links[b as usize].nchildren as usize);
        let mut c = self.links[b as usize].first_child;
        while c != NONE {
            v.push(c);
            c = self.links[c as usize].next_sibling;
        }
        v.reverse();
        v
    }
}
