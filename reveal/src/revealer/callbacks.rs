//! The JDK callback rule: live classes, classes that implement a callback
//! interface, and their overrides of methods of filtered `java.*`
//! supertypes.

use super::state::Revealer;
use crate::hierarchy::{has_code, is_virtual};
use crate::model::{EdgeKind, MethodKey};

impl Revealer {
    /// The subgraph called into filtered code: the callback rule applies to
    /// every live class, and every class implementing a callback interface,
    /// from now on.
    pub(super) fn note_filtered_call(&mut self) {
        if self.calls_filtered {
            return;
        }
        self.calls_filtered = true;
        let mut live: Vec<String> = self.live.iter().cloned().collect();
        live.sort();
        for class in live {
            self.callbacks(&class);
        }
        for class in self.handed.clone() {
            if !self.live.contains(&class) {
                self.callbacks(&class);
            }
        }
    }

    pub(super) fn make_live(&mut self, class: &str) {
        if self.live.contains(class) {
            return;
        }
        self.live.insert(class.to_string());
        if self.calls_filtered {
            self.callbacks(class);
        }
    }

    /// The callback rule for one loaded class: its overrides of methods of
    /// filtered `java.*` supertypes when the class is live, else only those
    /// of callback interfaces ([`CALLBACK_INTERFACES`]).
    pub(super) fn callbacks(&mut self, class: &str) {
        let Some(loaded) = self.hierarchy.get(class) else {
            return;
        };
        if !self.filters.instrumentable(class) {
            return;
        }
        let live = self.live.contains(class);
        if live && self.live_callbacks_where_they_run {
            // Redefined for its reachable methods: its callbacks hold
            // dormant probes and are revealed where they run.
            return;
        }
        let filtered_supers: Vec<String> = self
            .hierarchy
            .supertypes(class)
            .into_iter()
            .skip(1)
            .filter(|s| {
                self.filters.calls_back(s) && (live || self.filters.is_callback_interface(s))
            })
            .collect();
        if filtered_supers.is_empty() {
            return;
        }
        let keys: Vec<MethodKey> = loaded
            .methods
            .iter()
            .filter(|m| is_virtual(m) && has_code(m) && m.name != "finalize")
            .filter(|m| {
                filtered_supers.iter().any(|s| {
                    self.hierarchy
                        .declared(s, &m.name, &m.descriptor)
                        .is_some_and(is_virtual)
                })
            })
            .map(|m| MethodKey::new(class, &m.name, &m.descriptor))
            .collect();
        for k in keys {
            self.mark(k, EdgeKind::Callback, None);
        }
    }
}
