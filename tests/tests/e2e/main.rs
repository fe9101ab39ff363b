//! The end-to-end tests: real JVMs, real `sprig` processes, on every
//! installed JDK. One test binary, so that the harness keeps both cores busy
//! across all of them (`cargo test -p sprig-tests --test e2e MODULE::`).

mod accuracy_e2e;
mod alloc_e2e;
mod alloc_views_e2e;
mod cli_kill_e2e;
mod cost_e2e;
mod lifecycle_e2e;
mod live_e2e;
mod loaders_e2e;
mod locks_e2e;
mod outputs_e2e;
mod probe_path_e2e;
mod profile_e2e;
mod reveal_e2e;
mod running_e2e;
mod sample_e2e;
mod sample_edges_e2e;
mod sample_native_e2e;
mod sampled_alloc_e2e;
mod sampled_e2e;
mod scalar_e2e;
mod suggest_e2e;
mod threads_e2e;
mod verify_corpus;
mod vthreads_e2e;
mod windows_e2e;
