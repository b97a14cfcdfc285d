//! Lineages: the objects of a trace that must stay in one part when it has no tenants to
//! split by.
//!
//! An object is one life of a name: a volume, snapshot, group snapshot, workload or
//! ordered-write log from the event that makes it (or the header that declares it) to the
//! event that ends it; a name made again later is another object. Every event joins the
//! objects it names (a snapshot its volume, a restore its snapshot, a clone its source, a
//! group snapshot its volumes, an attach its workload and volumes, an `io_phase` its workload,
//! volumes and log), and a lineage is a set of objects joined that way: union-find over the
//! objects, the root being a lineage's first object, so the result does not depend on hash
//! order. A part holding whole lineages replays on its own: every object an event of it names
//! was made (or declared) in it, and every conflict the checker looks for (a second
//! read-write-once attach, a delete of a mounted volume) is between objects of one lineage.
//!
//! The objects get their numbers in the order the events name them, so a second pass over
//! the same events ([`Lineages::rewind`], then the same calls) finds the same objects and
//! with them the lineages of the first.

use std::collections::HashMap;

use super::objects;
use crate::model::{Header, Op};
use crate::units::Name;

/// The objects of a trace and the lineages they form.
#[derive(Debug, Default)]
pub(super) struct Lineages {
    /// The object each live name is now.
    live: HashMap<(&'static str, Name), u32>,
    /// Union-find over objects: each one's parent (a root is its own).
    parent: Vec<u32>,
    /// Events charged to each object (the first object an event names).
    weight: Vec<u64>,
    /// Objects numbered so far in this pass.
    next: u32,
}

impl Lineages {
    /// The objects the header declares: its volumes, then its workloads joined to theirs.
    pub(super) fn of(header: &Header) -> Self {
        let mut l = Lineages::default();
        l.declare(header);
        l
    }

    fn declare(&mut self, header: &Header) {
        for v in &header.volumes {
            self.object("volume", &v.name);
        }
        for w in &header.workloads {
            let wl = self.object("workload", &w.name);
            for v in &w.volumes {
                let v = self.object("volume", v);
                self.unite(wl, v);
            }
        }
    }

    /// Starts a second pass over the same events: the same objects get the same numbers.
    pub(super) fn rewind(&mut self, header: &Header) {
        self.live.clear();
        self.next = 0;
        self.declare(header);
    }

    /// The objects of the header's declared volumes and workloads, in header order (call
    /// right after [`Lineages::of`] or [`Lineages::rewind`]).
    pub(super) fn declared(&self, header: &Header) -> (Vec<u32>, Vec<u32>) {
        let vols = header
            .volumes
            .iter()
            .filter_map(|v| self.live.get(&("volume", v.name.clone())).copied())
            .collect();
        let wls = header
            .workloads
            .iter()
            .filter_map(|w| self.live.get(&("workload", w.name.clone())).copied())
            .collect();
        (vols, wls)
    }

    /// The object `name` is now, or a new one.
    fn object(&mut self, kind: &'static str, name: &Name) -> u32 {
        if let Some(&o) = self.live.get(&(kind, name.clone())) {
            return o;
        }
        let o = self.next;
        self.next += 1;
        if o as usize >= self.parent.len() {
            self.parent.push(o);
            self.weight.push(0);
        }
        self.live.insert((kind, name.clone()), o);
        o
    }

    /// Joins the objects `op` names and charges the event to the first; `None` for an op that
    /// names none (a node operation, a marker).
    pub(super) fn event(&mut self, op: &Op) -> Option<u32> {
        let mut first = None;
        for (kind, name, ends) in objects(op) {
            let o = self.object(kind, name);
            match first {
                None => first = Some(o),
                Some(f) => self.unite(f, o),
            }
            if ends {
                self.live.remove(&(kind, name.clone()));
            }
        }
        if let Some(f) = first {
            self.weight[f as usize] += 1;
        }
        first
    }

    /// The lineage (its root object) of object `o`.
    pub(super) fn root(&mut self, mut o: u32) -> u32 {
        while self.parent[o as usize] != o {
            let up = self.parent[self.parent[o as usize] as usize];
            self.parent[o as usize] = up;
            o = up;
        }
        o
    }

    fn unite(&mut self, a: u32, b: u32) {
        let (a, b) = (self.root(a), self.root(b));
        // The earlier object is the root: a lineage is named by its first object.
        let (lo, hi) = if a < b { (a, b) } else { (b, a) };
        self.parent[hi as usize] = lo;
    }

    /// Every lineage with the events charged to it, in order of its first object.
    pub(super) fn weights(&mut self) -> Vec<(u32, u64)> {
        let mut by_root: HashMap<u32, u64> = HashMap::new();
        for o in 0..self.parent.len() as u32 {
            let r = self.root(o);
            *by_root.entry(r).or_default() += self.weight[o as usize];
        }
        let mut v: Vec<(u32, u64)> = by_root.into_iter().collect();
        v.sort_unstable();
        v
    }
}

/// Assigns weighted units to `n` parts, heaviest first, each to the part with the least
/// weight so far (ties: the lower part; equal units: the earlier one). `preload` is weight a
/// part has before any unit (events that go to a part by rule). Deterministic.
pub(super) fn balance(units: &[u64], n: usize, preload: &[u64]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..units.len()).collect();
    order.sort_by_key(|&i| (std::cmp::Reverse(units[i]), i));
    let mut load: Vec<u64> = (0..n)
        .map(|p| preload.get(p).copied().unwrap_or(0))
        .collect();
    let mut part = vec![0; units.len()];
    for i in order {
        let p = (0..n).min_by_key(|&p| (load[p], p)).unwrap_or(0);
        load[p] += units[i];
        part[i] = p;
    }
    part
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn balance_fills_the_lightest_part_heaviest_first() {
        assert_eq!(balance(&[5, 1, 4, 3, 3], 2, &[]), [0, 1, 1, 1, 0]);
        // Part 0 already carries 6: the heaviest unit goes to part 1.
        assert_eq!(balance(&[5, 1], 2, &[6]), [1, 1]);
        assert_eq!(balance(&[2, 2, 2], 3, &[]), [0, 1, 2]);
    }
}
