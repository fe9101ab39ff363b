//! The calling thread's CPU affinity (calibration runs its windows on each
//! CPU the thread may use in turn, see `calibrate`).

/// The calling thread's kernel thread id.
pub fn gettid() -> u32 {
    // SAFETY: gettid has no preconditions and cannot fail.
    let tid = unsafe { libc::gettid() };
    u32::try_from(tid).unwrap_or(0)
}

/// The CPUs a thread may run on, as read by [`Affinity::current`].
pub struct Affinity {
    set: libc::cpu_set_t,
    cpus: Vec<usize>,
}

impl Affinity {
    /// The calling thread's current affinity, or `None` when the kernel
    /// does not say.
    pub fn current() -> Option<Affinity> {
        // SAFETY: cpu_set_t is plain data; zeroed is an empty set.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: pid 0 is the calling thread; `set` is writable and its
        // size is passed, so the kernel writes inside it.
        let rc =
            unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
        if rc != 0 {
            return None;
        }
        let cpus = (0..libc::CPU_SETSIZE as usize)
            // SAFETY: i < CPU_SETSIZE, the set's capacity.
            .filter(|&i| unsafe { libc::CPU_ISSET(i, &set) })
            .collect();
        Some(Affinity { set, cpus })
    }

    /// The CPUs in the set.
    pub fn cpus(&self) -> &[usize] {
        &self.cpus
    }

    /// Pins the calling thread to `cpu`; false when the kernel refuses.
    pub fn pin(&self, cpu: usize) -> bool {
        if cpu >= libc::CPU_SETSIZE as usize {
            return false;
        }
        // SAFETY: as in `current`.
        let mut one: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: cpu < CPU_SETSIZE (checked above); `one` is a valid set.
        unsafe { libc::CPU_SET(cpu, &mut one) };
        // SAFETY: pid 0 is the calling thread; `one` is a valid set of the
        // size passed.
        unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &one) == 0 }
    }

    /// Gives the calling thread back the affinity `current` read.
    pub fn restore(&self) {
        // SAFETY: pid 0 is the calling thread; `set` is the valid set the
        // kernel gave us, of the size passed.
        let _ = unsafe {
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &self.set)
        };
    }
}
