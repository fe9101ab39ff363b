//! Helpers shared by the tests that run part of themselves as another user.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

/// A copy of this test binary that any user can run, for tests that
/// re-execute themselves as another user: the checkout may sit in a
/// private directory (a clone under a 0700 home) where that user cannot
/// reach the binary. The copy lives in a fresh 0755 directory under /tmp,
/// removed when the returned guard drops.
pub struct SharedExe {
    dir: PathBuf,
    pub path: PathBuf,
}

impl SharedExe {
    pub fn new() -> SharedExe {
        let exe = std::env::current_exe().expect("current exe");
        let dir = PathBuf::from(format!(
            "/tmp/sprig-test-exe-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        fs::create_dir(&dir).expect("create the shared exe directory");
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        let path = dir.join(exe.file_name().unwrap());
        fs::copy(&exe, &path).expect("copy the test binary");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
        SharedExe { dir, path }
    }
}

impl Drop for SharedExe {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}
