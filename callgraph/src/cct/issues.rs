//! Stream problems on one thread: counted, then described in the report's
//! warnings; never a panic.

/// Counters of stream problems on one thread.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamIssues {
    /// MethodEntry with no open root context: ignored.
    pub entries_outside_root: u64,
    /// Exit (method or root) with an empty shadow stack: ignored.
    pub exits_without_entry: u64,
    /// Exit whose id is not the top frame's but is further down the stack
    /// (for a root exit: not the only frame's): the frames above it were
    /// closed at the exit's timestamp.
    pub mismatched_exits: u64,
    /// Exit whose id is nowhere on the stack: ignored.
    pub unmatched_exits: u64,
    /// Frames closed because a mismatched exit skipped over them.
    pub frames_closed_by_mismatch: u64,
    /// Frames still open at ThreadEnd, closed at its timestamp.
    pub frames_open_at_thread_end: u64,
    /// Frames still open at the end of profiling, closed at the last timestamp.
    pub frames_open_at_finish: u64,
    /// RootEntry while a root context was already open (its exits were
    /// lost): the open frames were closed at the entry's timestamp.
    pub root_entries_in_context: u64,
    /// Frames closed that way (marked incomplete).
    pub frames_closed_by_root_entry: u64,
    /// Exits whose timestamp was before the entry's (counted as 0 ticks).
    pub clock_went_backwards: u64,
    /// Records of a kind this build does not know.
    pub unknown_kinds: u64,
    /// Allocation records with no frame open, or too short to read.
    pub allocs_outside_root: u64,
}

impl StreamIssues {
    pub(super) fn describe(&self, thread: u32, out: &mut Vec<String>) {
        let items: [(u64, &str); 11] = [
            (
                self.entries_outside_root,
                "method entries outside a root context were ignored",
            ),
            (
                self.exits_without_entry,
                "exits without a matching entry were ignored",
            ),
            (
                self.mismatched_exits,
                "exits did not match the top frame (frames above the matching one were closed)",
            ),
            (
                self.unmatched_exits,
                "exits matched no open frame and were ignored",
            ),
            (
                self.frames_closed_by_mismatch,
                "frames were closed by a mismatched exit (marked incomplete)",
            ),
            (
                self.frames_closed_by_root_entry,
                "frames were open when a new root context began (closed there, marked incomplete)",
            ),
            (
                self.frames_open_at_thread_end,
                "frames were still open when the thread ended (closed there, marked incomplete)",
            ),
            (
                self.frames_open_at_finish,
                "frames were still open at the end of profiling (closed at the last timestamp, marked incomplete)",
            ),
            (
                self.clock_went_backwards,
                "exits had a timestamp before their entry (counted as 0)",
            ),
            (
                self.unknown_kinds,
                "records of an unknown kind were skipped",
            ),
            (
                self.allocs_outside_root,
                "allocation records outside a root context were ignored",
            ),
        ];
        for (n, what) in items {
            if n > 0 {
                out.push(format!("thread {thread}: {n} {what}"));
            }
        }
    }

    pub(super) fn add(&mut self, o: &StreamIssues) {
        self.entries_outside_root += o.entries_outside_root;
        self.exits_without_entry += o.exits_without_entry;
        self.mismatched_exits += o.mismatched_exits;
        self.unmatched_exits += o.unmatched_exits;
        self.frames_closed_by_mismatch += o.frames_closed_by_mismatch;
        self.frames_open_at_thread_end += o.frames_open_at_thread_end;
        self.frames_open_at_finish += o.frames_open_at_finish;
        self.root_entries_in_context += o.root_entries_in_context;
        self.frames_closed_by_root_entry += o.frames_closed_by_root_entry;
        self.clock_went_backwards += o.clock_went_backwards;
        self.unknown_kinds += o.unknown_kinds;
        self.allocs_outside_root += o.allocs_outside_root;
    }
}
