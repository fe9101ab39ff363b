//! Getting the agent into the JVM and connected back: the session's files
//! (private directory, control socket, event ring), the attach to a
//! running JVM or the start of a new one with `-agentpath`, the handshake,
//! and the thread that reads the control connection.

use std::os::fd::OwnedFd;
use std::process::Child;
use std::sync::Arc;
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use sprig::{attach, jvm};
use sprig_wire::control::ClockKind;
use sprig_wire::ring::{Region, RingConfig};
use sprig_wire::session::{Channel, Listener, PeerExpectation, SessionDir, SessionError};
use sprig_wire::{Message, clock};

/// Everything created for one session on the CLI side. Dropping it removes
/// the private directory and the socket; the ring (a memfd) goes with the
/// last reference to its mapping.
pub(crate) struct Prepared {
    pub(super) dir: SessionDir,
    pub(crate) region: Arc<Region>,
    /// The ring's sealed memfd, handed to the agent with `Start`.
    pub(super) ring_fd: OwnedFd,
    pub(super) listener: Listener,
}

pub(super) fn prepare_with(
    clock_kind: ClockKind,
    ring_mib: u32,
    owner: Option<(u32, u32)>,
) -> Result<Prepared> {
    let dir = match owner {
        Some((uid, gid)) => SessionDir::create_for_owner(uid, gid),
        None => SessionDir::create_in(&std::env::temp_dir()),
    }
    .context("cannot create the private session directory")?;
    let (clock_kind, ticks_per_sec) = clock::choose(clock_kind);
    let cfg = ring_config(ring_mib, clock_kind, ticks_per_sec)?;
    // Anonymous shared memory, handed over the control socket: nothing on
    // a disk, nothing another user could open or truncate.
    let (region, ring_fd) = Region::create_memfd(&cfg).context("cannot create the event ring")?;
    let listener = Listener::bind(&dir).context("cannot create the control socket")?;
    Ok(Prepared {
        dir,
        region,
        ring_fd,
        listener,
    })
}

/// The ring of `ring_mib` MiB in 64 KiB segments. The size is computed in
/// 64 bits (4096 MiB, the largest `--ring-mib`, is 2^32 bytes) and checked
/// against the ring's limits.
fn ring_config(ring_mib: u32, clock: ClockKind, ticks_per_sec: u64) -> Result<RingConfig> {
    const SEGMENT_BYTES: u32 = 64 * 1024;
    let bytes = u64::from(ring_mib) * 1024 * 1024;
    let segments = u32::try_from(bytes / u64::from(SEGMENT_BYTES))
        .ok()
        .filter(|&n| {
            n <= sprig_wire::ring::MAX_SEGMENTS && bytes <= sprig_wire::ring::MAX_REGION_BYTES
        })
        .ok_or_else(|| anyhow!("--ring-mib {ring_mib} is larger than the event ring allows"))?;
    Ok(RingConfig {
        segment_bytes: SEGMENT_BYTES,
        segments,
        clock,
        ticks_per_sec,
    })
}

/// Loads the agent into JVM `pid` and waits for it to connect back: the
/// session's files, the control channel and the JVM's name and version.
pub(crate) fn attach_to(
    pid: u32,
    clock_kind: ClockKind,
    ring_mib: u32,
    timeout: Duration,
) -> Result<(Prepared, Channel, String)> {
    let target = jvm::inspect(pid)?;
    let agent = attach::agent_for(Some(&target))?;
    let me = sprig_wire::session::euid();
    let owner = (me == 0 && target.uid != 0).then_some((target.uid, target.gid));
    let prepared = prepare_with(clock_kind, ring_mib, owner)?;
    let options = prepared.dir.agent_options(std::process::id());
    let started = Instant::now();
    attach::load_agent(&target, &agent, &options.format(), timeout)?;
    let expect = PeerExpectation {
        pid: Some(pid),
        uid: target.uid,
        token: prepared.dir.token(),
    };
    let left = timeout
        .saturating_sub(started.elapsed())
        .max(Duration::from_secs(2));
    let (channel, jvm_info) = prepared
        .listener
        .accept(&expect, left)
        .map_err(|e| match e {
            SessionError::Timeout(_) => {
                anyhow!("the agent loaded into JVM {pid} but never connected back within {left:?}")
            }
            other => anyhow!(other).context("the agent's connection was refused"),
        })?;
    let jvm_line = format!("{} {}", jvm_info.vm_name, jvm_info.version);
    Ok((prepared, channel, jvm_line))
}

/// Starts `command` (`java [options] ...`) with the agent loaded from its
/// first instruction and waits for it to connect back: the session's
/// files, the JVM process, the control channel and the JVM's name and
/// version. A JVM that exits first, or connects wrongly, is reaped.
pub(crate) fn launch(
    command: &[String],
    clock_kind: ClockKind,
    ring_mib: u32,
) -> Result<(Prepared, Child, Channel, String)> {
    let agent = attach::agent_for(None)?;
    let prepared = prepare_with(clock_kind, ring_mib, None)?;
    let options = prepared.dir.agent_options(std::process::id());
    let (java, rest) = command
        .split_first()
        .ok_or_else(|| anyhow!("missing java command after --"))?;
    let mut cmd = std::process::Command::new(java);
    cmd.arg(format!(
        "-agentpath:{}={}",
        agent.display(),
        options.format()
    ));
    cmd.args(rest);
    let mut child = cmd
        .spawn()
        .with_context(|| format!("cannot start {java:?}"))?;
    let pid = child.id();
    let expect = PeerExpectation {
        pid: Some(pid),
        uid: sprig_wire::session::euid(),
        token: prepared.dir.token(),
    };
    let accepted = loop {
        match prepared
            .listener
            .accept(&expect, Duration::from_millis(200))
        {
            Ok(c) => break Ok(c),
            Err(SessionError::Timeout(_)) => {
                if let Some(status) = child.try_wait()? {
                    break Err(anyhow!(
                        "the JVM exited ({status}) before the sprig agent connected: check the java command line"
                    ));
                }
            }
            Err(e) => break Err(anyhow!(e).context("the agent's connection was refused")),
        }
    };
    let (channel, jvm_info) = match accepted {
        Ok(c) => c,
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(e);
        }
    };
    let jvm_line = format!("{} {}", jvm_info.vm_name, jvm_info.version);
    Ok((prepared, child, channel, jvm_line))
}

/// Reads control messages on a thread so the main loop never blocks on the
/// socket while draining the ring.
pub(super) fn spawn_reader(mut channel: Channel) -> Receiver<Result<Message, SessionError>> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("sprig-control-reader".into())
        .spawn(move || {
            loop {
                let m = channel.recv();
                let end = m.is_err();
                if tx.send(m).is_err() || end {
                    break;
                }
            }
        })
        .expect("spawn control reader thread");
    rx
}

/// For the tests of a work: session files, and an agent played by a
/// thread running `agent` with the agent's option string, connected back;
/// the CLI's end of the connection and the thread.
#[cfg(test)]
pub(crate) fn played_agent<R: Send + std::fmt::Debug + 'static>(
    agent: impl FnOnce(sprig_wire::control::AgentOptions) -> R + Send + 'static,
) -> (Prepared, Channel, std::thread::JoinHandle<R>) {
    let prepared = prepare_with(ClockKind::Monotonic, 1, None).expect("session files");
    let opts = prepared.dir.agent_options(std::process::id());
    let thread = std::thread::spawn(move || agent(opts));
    let expect = PeerExpectation {
        pid: Some(std::process::id()),
        uid: sprig_wire::session::euid(),
        token: prepared.dir.token(),
    };
    match prepared.listener.accept(&expect, Duration::from_secs(10)) {
        Ok((channel, _)) => (prepared, channel, thread),
        Err(e) => {
            // Say what the played agent met, not only that it never came.
            let ended = (0..200).any(|_| {
                std::thread::sleep(Duration::from_millis(10));
                thread.is_finished()
            });
            let agent = if ended {
                format!("{:?}", thread.join())
            } else {
                "still running".to_owned()
            };
            panic!("the agent did not connect: {e:?}; the played agent: {agent}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_largest_ring_is_made() {
        // 4096 MiB, the largest `--ring-mib`, is 2^32 bytes.
        let p = prepare_with(ClockKind::Tsc, 4096, None).expect("a 4 GiB ring");
        assert_eq!(
            u64::from(p.region.segments()) * 64 * 1024,
            4096 * 1024 * 1024
        );
    }
}
