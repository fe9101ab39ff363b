//! Allocation samples taken outside every root context (`--alloc-interval`),
//! by the allocating thread's stack and the object's class: estimates, as
//! the in-root samples are (each sample stands for the bytes its
//! Horvitz-Thompson weight says). The agent sends them at the end of the
//! session (`SampledOutsideStacks`), their frames named by `FrameMethod`.
//! Not kept in snapshots.

use super::{MethodInfo, Profile};
use std::collections::BTreeMap;

/// The allocation samples outside every root context, by stack.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OutsideAllocs {
    /// Frame id -> its method (only the frames the stacks hold).
    pub frames: BTreeMap<u32, MethodInfo>,
    /// Most estimated bytes first (ties by class and frames).
    pub stacks: Vec<OutsideAllocStack>,
    /// Samples the agent kept no stack for (its table was full, or the
    /// stack could not be read), and their bytes.
    pub unkept: u64,
    pub unkept_bytes_est: u64,
}

/// One class's allocation samples on one stack.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OutsideAllocStack {
    /// The sampled class id (`Profile::sampled_class` names it).
    pub class: u32,
    /// Frame ids, the leaf first.
    pub frames: Vec<u32>,
    /// The stack was deeper than its frames.
    pub truncated: bool,
    pub samples: u64,
    pub bytes_est: u64,
}

impl OutsideAllocs {
    /// Adds one batch; `names` gives the method of a frame id (an id
    /// it does not know is named `<unknown>`).
    pub fn add_batch(
        &mut self,
        batch: &sprig_wire::control::OutsideStacks,
        names: impl Fn(u32) -> Option<MethodInfo>,
    ) {
        for s in &batch.stacks {
            for &f in &s.frames {
                self.frames
                    .entry(f)
                    .or_insert_with(|| names(f).unwrap_or_else(|| MethodInfo::unknown(f)));
            }
            self.stacks.push(OutsideAllocStack {
                class: s.class,
                frames: s.frames.clone(),
                truncated: s.truncated,
                samples: s.samples,
                bytes_est: s.bytes_est,
            });
        }
        self.stacks.sort_by(|a, b| {
            b.bytes_est
                .cmp(&a.bytes_est)
                .then_with(|| a.class.cmp(&b.class))
                .then_with(|| a.frames.cmp(&b.frames))
        });
        self.unkept = batch.unkept;
        self.unkept_bytes_est = batch.unkept_bytes_est;
    }

    /// The method of frame `id`.
    pub fn frame(&self, id: u32) -> MethodInfo {
        self.frames
            .get(&id)
            .cloned()
            .unwrap_or_else(|| MethodInfo::unknown(id))
    }

    /// Estimated bytes over every stack kept.
    pub fn bytes_est(&self) -> u64 {
        self.stacks
            .iter()
            .fold(0u64, |b, s| b.saturating_add(s.bytes_est))
    }
}

impl Profile {
    /// The samples outside every root context by stack, when the agent
    /// sent any.
    pub fn outside_allocs(&self) -> Option<&OutsideAllocs> {
        self.outside_allocs
            .as_ref()
            .filter(|o| !o.stacks.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sprig_wire::control::{OutsideStack, OutsideStacks};

    #[test]
    fn batches_add_up_most_bytes_first_with_their_frames_named() {
        let mut o = OutsideAllocs::default();
        let stack = |class, frames: &[u32], bytes_est| OutsideStack {
            class,
            frames: frames.to_vec(),
            truncated: false,
            samples: 1,
            bytes_est,
        };
        let names = |f: u32| (f < 10).then(|| MethodInfo::new("p.C", &format!("m{f}"), "()V"));
        o.add_batch(
            &OutsideStacks {
                stacks: vec![stack(1, &[1, 2], 10), stack(2, &[3], 30)],
                unkept: 1,
                unkept_bytes_est: 5,
            },
            names,
        );
        o.add_batch(
            &OutsideStacks {
                stacks: vec![stack(1, &[1, 11], 20)],
                unkept: 2,
                unkept_bytes_est: 9,
            },
            names,
        );
        let bytes: Vec<u64> = o.stacks.iter().map(|s| s.bytes_est).collect();
        assert_eq!(bytes, vec![30, 20, 10]);
        assert_eq!(o.bytes_est(), 60);
        assert_eq!((o.unkept, o.unkept_bytes_est), (2, 9));
        assert_eq!(o.frame(2).name, "m2");
        assert_eq!(o.frame(11).class, "<unknown>");
        assert_eq!(o.frames.len(), 4);
    }
}
