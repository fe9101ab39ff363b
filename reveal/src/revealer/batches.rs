//! Batches per class: every instrumented method of each class revealed
//! since the last batch, with the new ones marked added.

use super::state::Revealer;
use crate::config::Scheme;
use crate::outcome::{ClassBatch, Instrument, Revealed};

impl Revealer {
    /// Everything revealed since the last batch: classes to redefine and
    /// reflective sites to watch.
    pub fn take_redefinitions(&mut self) -> Revealed {
        let mut classes = Vec::new();
        for class in std::mem::take(&mut self.dirty) {
            if let Some(batch) = self.batch(&class) {
                classes.push(batch);
            }
        }
        if !classes.is_empty() {
            self.batches += 1;
        }
        Revealed {
            classes,
            reflective_sites: std::mem::take(&mut self.reflective),
        }
    }

    /// All instrumented methods of a class; marks them reported.
    pub(super) fn instruments(&mut self, class: &str) -> Vec<Instrument> {
        let nodes = self
            .instrumented_by_class
            .get(class)
            .cloned()
            .unwrap_or_default();
        let mut out = Vec::with_capacity(nodes.len());
        for n in nodes {
            let key = &self.graph[n];
            let has_calls = self
                .hierarchy
                .declared(&key.class, &key.name, &key.descriptor)
                .is_some_and(|m| m.has_calls);
            let st = &mut self.state[n.index()];
            let Some(id) = st.id else { continue };
            out.push(Instrument {
                id,
                name: key.name.clone(),
                descriptor: key.descriptor.clone(),
                is_root: st.is_root,
                needs_first_call_check: self.scheme == Scheme::Lazy && has_calls && !st.scanned,
                added: !st.reported,
            });
            st.reported = true;
        }
        out.sort_by_key(|i| i.id);
        out
    }

    pub(super) fn batch(&mut self, class: &str) -> Option<ClassBatch> {
        let loaders = self.hierarchy.get(class)?.loaders.clone();
        let methods = self.instruments(class);
        if methods.is_empty() {
            return None;
        }
        Some(ClassBatch {
            class: class.to_string(),
            loaders,
            methods,
        })
    }
}
