//! Tenants: who owns each object, for a split by tenant.
//!
//! An event belongs to its tenant (the event's `tenant`, else the header's default namespace,
//! else `default`). A split by tenant is only sound when every object belongs to one tenant;
//! [`Tenants`] follows the objects' owners through the first pass and keeps the first event
//! where a volume, snapshot, group snapshot, workload or log of one tenant is used by another
//! (an object deleted may be made again by another tenant). It also remembers which tenant
//! first used each declared volume, for the parts' headers.

use std::collections::HashMap;

use super::{Shared, objects};
use crate::model::{Event, Header};
use crate::units::Name;

/// The tenants of a trace, as the first pass finds them.
#[derive(Debug)]
pub(super) struct Tenants {
    /// The tenant of events without one.
    pub(super) default: String,
    /// Tenants in order of their first declared workload or event, with their events.
    pub(super) seen: Vec<(String, u64)>,
    /// The first object two tenants use, if any.
    pub(super) shared: Option<Shared>,
    /// Which tenant first used each declared volume (`None`: nobody).
    pub(super) declared_vol: HashMap<Name, Option<String>>,
    owner: HashMap<(&'static str, Name), (String, u64)>,
}

impl Tenants {
    pub(super) fn of(header: &Header) -> Self {
        let default = header
            .defaults
            .namespace
            .as_ref()
            .map_or_else(|| "default".to_owned(), |n| n.as_str().to_owned());
        let mut t = Tenants {
            seen: Vec::new(),
            shared: None,
            declared_vol: header
                .volumes
                .iter()
                .map(|v| (v.name.clone(), None))
                .collect(),
            owner: HashMap::new(),
            default,
        };
        for w in &header.workloads {
            let tenant = t.workload_tenant(w.tenant.as_ref());
            // A tenant of declared workloads has a part even without events.
            if !t.seen.iter().any(|(n, _)| *n == tenant) {
                t.seen.push((tenant.clone(), 0));
            }
            t.owner
                .insert(("workload", w.name.clone()), (tenant.clone(), 0));
            for v in &w.volumes {
                t.owner.insert(("volume", v.clone()), (tenant.clone(), 0));
                t.declared_vol.insert(v.clone(), Some(tenant.clone()));
            }
        }
        t
    }

    /// The tenant of a declared workload.
    pub(super) fn workload_tenant(&self, tenant: Option<&Name>) -> String {
        tenant.map_or_else(|| self.default.clone(), |t| t.as_str().to_owned())
    }

    /// The tenant of an event.
    pub(super) fn of_event(&self, ev: &Event) -> String {
        self.workload_tenant(ev.tenant.as_ref())
    }

    /// Notes a (non-marker) event, the `index`-th of the trace.
    pub(super) fn event(&mut self, index: u64, ev: &Event) {
        let t = self.of_event(ev);
        match self.seen.iter_mut().find(|(n, _)| *n == t) {
            Some((_, n)) => *n += 1,
            None => self.seen.push((t.clone(), 1)),
        }
        if self.shared.is_some() {
            return;
        }
        for (kind, name, ends) in objects(&ev.op) {
            let key = (kind, name.clone());
            match self.owner.get(&key) {
                Some((o, since)) if *o != t => {
                    self.shared = Some(Shared {
                        index,
                        id: ev.id,
                        kind,
                        name: name.to_string(),
                        owner: o.clone(),
                        since: *since,
                        tenant: t,
                    });
                    return;
                }
                Some(_) => {}
                None => {
                    self.owner.insert(key.clone(), (t.clone(), index));
                }
            }
            if kind == "volume"
                && let Some(first) = self.declared_vol.get_mut(name)
                && first.is_none()
            {
                *first = Some(t.clone());
            }
            if ends {
                self.owner.remove(&key);
            }
        }
    }

    /// The tenant whose part a declared volume goes to: its first user's, else the default.
    pub(super) fn volume_tenant(&self, name: &Name) -> &str {
        self.declared_vol
            .get(name)
            .and_then(Option::as_deref)
            .unwrap_or(&self.default)
    }

    /// Whether a declared volume nobody uses needs the default tenant's part.
    pub(super) fn unused_declared(&self) -> bool {
        self.declared_vol.values().any(Option::is_none)
    }
}
