//! `pcibench serve CARD` in a child process, for the vfio-user tests, with its log collected.

use std::io::BufRead;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// `pcibench serve CARD` on a socket in a fresh directory; killed when dropped.
pub struct Served {
    pub child: Child,
    pub socket: PathBuf,
    /// Its log (stderr) so far, a line each: read as it comes, so the pipe never fills.
    pub log: Arc<Mutex<Vec<String>>>,
    _dir: tempfile::TempDir,
}

impl Served {
    pub fn start(card: &str, extra: &[&str]) -> Served {
        Served::start_with(&[card], extra)
    }

    /// `pcibench serve WHAT... --socket S EXTRA...` (`--model PATH.so` in `common::models`).
    pub fn start_with(what: &[&str], extra: &[&str]) -> Served {
        let card = what.join(" ");
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("dev.sock");
        let mut child = Command::new(env!("CARGO_BIN_EXE_pcibench"))
            .arg("serve")
            .args(what)
            .args(["--socket", socket.to_str().unwrap()])
            .args(extra)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let (stderr, lines) = (child.stderr.take().unwrap(), Arc::clone(&log));
        std::thread::spawn(move || {
            for l in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
                lines.lock().unwrap().push(l);
            }
        });
        // Bounded wait for the listener (a slow host takes longer, never a different result).
        let until = Instant::now() + Duration::from_secs(60);
        while !socket.exists() {
            assert!(Instant::now() < until, "pcibench serve {card} never listened");
            if let Ok(Some(status)) = child.try_wait() {
                panic!("pcibench serve {card} exited ({status}) before it listened");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Served { child, socket, log, _dir: dir }
    }

    pub fn device(&self) -> String {
        format!("vfio-user:{}", self.socket.display())
    }

    /// The first log line from index `from` on that `want` accepts, and the index after it
    /// (bounded: a line that never comes fails, saying what was awaited).
    pub fn wait_log(&self, from: usize, what: &str, want: impl Fn(&str) -> bool) -> (String, usize) {
        let until = Instant::now() + Duration::from_secs(300);
        loop {
            {
                let log = self.log.lock().unwrap();
                if let Some(i) = (from..log.len()).find(|&i| want(&log[i])) {
                    return (log[i].clone(), i + 1);
                }
            }
            assert!(Instant::now() < until, "serve's log never said {what}: {:?}", self.log.lock().unwrap());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Lines logged so far.
    pub fn logged(&self) -> usize {
        self.log.lock().unwrap().len()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
