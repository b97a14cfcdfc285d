//! Time order in bounded memory, and what an attach learns after its pod create.
//!
//! **Reorder window.** An API server writes an audit event when the request completes but
//! stamps it with the time it was received, so a file is in order only up to the longest
//! request (60 s by default). Sources are read side by side, always the one whose latest
//! request is earliest, and a request is released once every unfinished source has read past
//! its time plus [`AuditOptions::reorder_window`]. Memory is what that window holds, not the
//! log; a request further out of order than the window is bad input (named by file and line)
//! rather than silently misplaced.
//!
//! **Attach enrichment.** A pod create knows its claims but, usually, not its node (the
//! scheduler's `pods/binding` comes after) nor when its volumes were attached (the
//! external-attacher's VolumeAttachment status write). The attach waits in a queue, and the
//! requests after it with it, until both are known or [`AuditOptions::attach_horizon`] has
//! passed. Its `observed` becomes the time from the pod create to the last of its volumes
//! attached on its node (a volume already attached there when the pod was created, as when
//! a ReadWriteOnce volume is shared on one node, counts as attached at once). The bindings,
//! PV bindings and VolumeAttachment requests are consumed here.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::io::BufRead;

use super::read::{Reader, Source};
use super::{Act, AuditCounts, AuditOptions, Item};
use crate::{BadInput, ImportError, ImportReport, Policy};

/// Heap entry ordered by `(t, src, seq)`.
struct Held(Item);

impl Held {
    fn key(&self) -> (i128, usize, u64) {
        (self.0.t, self.0.src, self.0.seq)
    }
}

impl PartialEq for Held {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}
impl Eq for Held {}
impl PartialOrd for Held {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Held {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.key().cmp(&other.key())
    }
}

/// Reads every source and hands the mapped requests to `out` in time order, enriched.
pub(super) fn merge<R: BufRead>(
    sources: Vec<(String, R)>,
    opts: AuditOptions,
    policy: Policy,
    report: &mut ImportReport,
    counts: &mut AuditCounts,
    out: &mut dyn FnMut(Item, &mut AuditCounts) -> Result<(), ImportError>,
) -> Result<(), ImportError> {
    let window = i128::from(opts.reorder_window);
    let mut srcs: Vec<Source<R>> = sources
        .into_iter()
        .map(|(n, r)| Source::new(n, r))
        .collect();
    let names: Vec<String> = srcs.iter().map(|s| s.name.clone()).collect();
    let mut frontier = vec![i128::MIN; srcs.len()];
    let mut heap: BinaryHeap<Reverse<Held>> = BinaryHeap::new();
    let mut released = i128::MIN;
    let mut enrich = Enricher::new(opts);
    let mut reader = Reader::new(policy, opts, report, counts);
    loop {
        let next = (0..srcs.len())
            .filter(|&i| !srcs[i].done)
            .min_by_key(|&i| frontier[i]);
        let Some(i) = next else { break };
        reader.pull(i, &mut srcs[i])?;
        while let Some(item) = reader.items.pop_front() {
            if item.t < released {
                let b = BadInput {
                    file: names[item.src].clone(),
                    line: item.line,
                    record: false,
                    field: "requestReceivedTimestamp".into(),
                    message: format!(
                        "{:.3} s before the latest request read before it from this file: the \
                         log is further out of order than the {} s reorder window",
                        (frontier[i] - item.t) as f64 / 1e9,
                        opts.reorder_window as f64 / 1e9
                    ),
                };
                // Bad input: counted in the report's skipped lines, not as read.
                reader.counts.mapped -= 1;
                reader.counts.events -= 1;
                reader.report.bad(policy, b)?;
                continue;
            }
            frontier[i] = frontier[i].max(item.t);
            heap.push(Reverse(Held(item)));
        }
        let limit = (0..srcs.len())
            .filter(|&i| !srcs[i].done)
            .map(|i| frontier[i])
            .min()
            .map_or(i128::MAX, |f| f.saturating_sub(window));
        while heap.peek().is_some_and(|h| h.0.0.t <= limit) {
            let Some(Reverse(Held(item))) = heap.pop() else {
                break;
            };
            released = item.t;
            enrich.advance(item.t, reader.counts, out)?;
            enrich.push(item, reader.counts);
            let held = heap.len() + enrich.queue.len();
            reader.counts.max_held = reader.counts.max_held.max(held as u64);
            enrich.release(false, reader.counts, out)?;
        }
    }
    while let Some(Reverse(Held(item))) = heap.pop() {
        enrich.advance(item.t, reader.counts, out)?;
        enrich.push(item, reader.counts);
        enrich.release(false, reader.counts, out)?;
    }
    enrich.release(true, reader.counts, out)
}

/// An attach waiting for its node and its volumes' attachment.
struct Waiting {
    /// Absolute index of its item in the queue.
    idx: u64,
    t: i128,
    node: Option<String>,
    pvcs: Vec<String>,
    /// When each claim's volume was attached on the pod's node.
    attached: Vec<Option<i128>>,
}

struct Enricher {
    horizon: i128,
    queue: VecDeque<Item>,
    /// Absolute index of `queue[0]`.
    base: u64,
    /// The time of the latest request pushed.
    now: i128,
    waiting: HashMap<String, Waiting>,
    pv_to_pvc: HashMap<String, String>,
    pvc_to_pv: HashMap<String, String>,
    /// VolumeAttachment → (PV, node).
    vas: HashMap<String, (String, Option<String>)>,
    /// (PV, node) → when it was attached.
    attached: HashMap<(String, String), i128>,
}

impl Enricher {
    fn new(opts: AuditOptions) -> Self {
        Enricher {
            horizon: i128::from(opts.attach_horizon),
            queue: VecDeque::new(),
            base: 0,
            now: i128::MIN,
            waiting: HashMap::new(),
            pv_to_pvc: HashMap::new(),
            pvc_to_pv: HashMap::new(),
            vas: HashMap::new(),
            attached: HashMap::new(),
        }
    }

    /// Moves the clock to `t`, handing on the attaches whose horizon has passed (so a
    /// VolumeAttachment reported later does not complete them) and what follows them.
    fn advance(
        &mut self,
        t: i128,
        counts: &mut AuditCounts,
        out: &mut dyn FnMut(Item, &mut AuditCounts) -> Result<(), ImportError>,
    ) -> Result<(), ImportError> {
        self.now = t;
        self.release(false, counts, out)
    }

    fn push(&mut self, mut item: Item, counts: &mut AuditCounts) {
        let t = item.t;
        match &item.act {
            Act::CreatePod { pod, pvcs, node } => {
                item.observed = None;
                let w = Waiting {
                    idx: self.base + self.queue.len() as u64,
                    t,
                    node: node.clone(),
                    pvcs: pvcs.clone(),
                    attached: vec![None; pvcs.len()],
                };
                let pod = pod.clone();
                self.queue.push_back(item);
                self.waiting.insert(pod.clone(), w);
                self.on_node(&pod, counts);
                return;
            }
            Act::BindPod { pod, node } => {
                if let Some(w) = self.waiting.get_mut(pod)
                    && w.node.is_none()
                {
                    w.node = Some(node.clone());
                    if let Some(it) = self.queue.get_mut((w.idx - self.base) as usize)
                        && let Act::CreatePod { node: n, .. } = &mut it.act
                    {
                        *n = Some(node.clone());
                    }
                    counts.bindings.1 += 1;
                    let pod = pod.clone();
                    self.on_node(&pod, counts);
                }
                return;
            }
            Act::BindPv { pv, vol } => {
                self.bind(pv, vol);
                return;
            }
            Act::CreatePvc {
                vol, pv: Some(pv), ..
            }
            | Act::UpdatePvc {
                vol, pv: Some(pv), ..
            } => {
                let (pv, vol) = (pv.clone(), vol.clone());
                self.bind(&pv, &vol);
            }
            Act::CreateVa { va, pv, node } => {
                self.vas.insert(va.clone(), (pv.clone(), node.clone()));
                return;
            }
            Act::VaStatus { va, attached } => {
                let Some((pv, Some(node))) = self.vas.get(va).cloned() else {
                    return;
                };
                let key = (pv.clone(), node.clone());
                if !*attached {
                    self.attached.remove(&key);
                    return;
                }
                if self.attached.contains_key(&key) {
                    return;
                }
                self.attached.insert(key, t);
                let Some(pvc) = self.pv_to_pvc.get(&pv).cloned() else {
                    return;
                };
                let pods: Vec<String> = self
                    .waiting
                    .iter_mut()
                    .filter(|(_, w)| w.node.as_deref() == Some(node.as_str()))
                    .filter_map(|(pod, w)| {
                        let mut hit = false;
                        for (c, a) in w.pvcs.iter().zip(&mut w.attached) {
                            if *c == pvc && a.is_none() {
                                *a = Some(t);
                                hit = true;
                            }
                        }
                        hit.then(|| pod.clone())
                    })
                    .collect();
                for pod in pods {
                    counts.volume_attachments.1 += 1;
                    self.complete(&pod, counts);
                }
                return;
            }
            Act::DeleteVa { va } => {
                if let Some((pv, Some(node))) = self.vas.remove(va) {
                    self.attached.remove(&(pv, node));
                }
                return;
            }
            Act::DeletePod { pod } if self.waiting.remove(pod).is_some() => {
                counts.attach_observed.1 += 1;
            }
            _ => {}
        }
        self.queue.push_back(item);
    }

    fn bind(&mut self, pv: &str, pvc: &str) {
        self.pv_to_pvc.insert(pv.to_owned(), pvc.to_owned());
        self.pvc_to_pv.insert(pvc.to_owned(), pv.to_owned());
    }

    /// The pod's node is known (at create or binding): its volumes already attached there
    /// count as attached at its create.
    fn on_node(&mut self, pod: &str, counts: &mut AuditCounts) {
        let Some(w) = self.waiting.get_mut(pod) else {
            return;
        };
        let Some(node) = w.node.clone() else {
            return;
        };
        for (pvc, a) in w.pvcs.iter().zip(&mut w.attached) {
            let at = self
                .pvc_to_pv
                .get(pvc)
                .and_then(|pv| self.attached.get(&(pv.clone(), node.clone())));
            if let (Some(at), None) = (at, *a) {
                *a = Some((*at).max(w.t));
            }
        }
        self.complete(pod, counts);
    }

    /// Writes the attach's observed time if every volume is attached.
    fn complete(&mut self, pod: &str, counts: &mut AuditCounts) {
        let Some(w) = self.waiting.get(pod) else {
            return;
        };
        if w.node.is_none() || w.attached.iter().any(Option::is_none) {
            return;
        }
        let last = w.attached.iter().flatten().max().copied().unwrap_or(w.t);
        if let Some(it) = self.queue.get_mut((w.idx - self.base) as usize) {
            it.observed = u64::try_from(last - w.t).ok();
        }
        counts.attach_observed.0 += 1;
        self.waiting.remove(pod);
    }

    /// Hands on the requests at the head that wait for nothing (all of them at the end).
    fn release(
        &mut self,
        all: bool,
        counts: &mut AuditCounts,
        out: &mut dyn FnMut(Item, &mut AuditCounts) -> Result<(), ImportError>,
    ) -> Result<(), ImportError> {
        while let Some(head) = self.queue.front() {
            if let Act::CreatePod { pod, .. } = &head.act
                && let Some(w) = self.waiting.get(pod)
                && w.idx == self.base
            {
                if !all && head.t.saturating_add(self.horizon) > self.now {
                    break;
                }
                let pod = pod.clone();
                self.waiting.remove(&pod);
                counts.attach_observed.1 += 1;
            }
            let Some(item) = self.queue.pop_front() else {
                break;
            };
            self.base += 1;
            out(item, counts)?;
        }
        Ok(())
    }
}
