//! `pcibench serve CARD` in a child process, for the vfio-user tests.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `pcibench serve CARD` on a socket in a fresh directory; killed when dropped.
pub struct Served {
    pub child: Child,
    pub socket: PathBuf,
    _dir: tempfile::TempDir,
}

impl Served {
    pub fn start(card: &str, extra: &[&str]) -> Served {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("dev.sock");
        let child = Command::new(env!("CARGO_BIN_EXE_pcibench"))
            .args(["serve", card, "--socket", socket.to_str().unwrap()])
            .args(extra)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Bounded wait for the listener (a slow host takes longer, never a different result).
        let until = Instant::now() + Duration::from_secs(60);
        while !socket.exists() {
            assert!(Instant::now() < until, "pcibench serve {card} never listened");
            std::thread::sleep(Duration::from_millis(20));
        }
        Served { child, socket, _dir: dir }
    }

    pub fn device(&self) -> String {
        format!("vfio-user:{}", self.socket.display())
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
