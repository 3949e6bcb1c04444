//! `file::Destination::write_with` (the one writer of output files) killed in the middle of a write: this test binary runs itself as
//! the writer (the ignored test below), which writes half of the new content, says so and waits;
//! the test kills it there (SIGKILL: no cleanup runs) and finds the old file whole under the name,
//! the half-written temporary beside it, and a later write replacing both cleanly.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};

const CHILD: &str = "PCIBENCH_ATOMIC_WRITER_TARGET";

#[ignore = "the writer half of killed_mid_write_leaves_the_old_file_whole, run by it"]
#[test]
fn writer_that_stops_half_way() {
    let Some(target) = std::env::var_os(CHILD) else { return };
    let dest = pcibench::file::Destination::check("-o", "pcibench.prom", Path::new(&target)).unwrap();
    dest.write_with(|f| {
        f.write_all(b"new first half\n")?;
        f.flush()?;
        println!("HALF WRITTEN");
        std::io::stdout().flush()?;
        // Killed here.
        std::thread::sleep(std::time::Duration::from_secs(600));
        f.write_all(b"new second half\n")
    })
    .unwrap();
}

#[test]
fn killed_mid_write_leaves_the_old_file_whole() {
    let t = tempfile::tempdir().unwrap();
    let target = t.path().join("pcibench.prom");
    std::fs::write(&target, "old 1\n").unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "writer_that_stops_half_way", "--nocapture", "--test-threads=1"])
        .env(CHILD, &target)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = BufReader::new(child.stdout.take().unwrap());
    let mut halfway = false;
    for line in out.lines() {
        if line.unwrap().contains("HALF WRITTEN") {
            halfway = true;
            break;
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(halfway, "the writer never reached the middle of its write");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "old 1\n", "the name still holds the old file, whole");
    let temps: Vec<String> = std::fs::read_dir(t.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "pcibench.prom")
        .collect();
    assert_eq!(temps.len(), 1, "{temps:?}");
    assert!(temps[0].starts_with(".pcibench-") && temps[0].ends_with(".tmp"), "{temps:?}: not *.prom");
    assert_eq!(std::fs::read_to_string(t.path().join(&temps[0])).unwrap(), "new first half\n");

    let dest = pcibench::file::Destination::check("-o", "pcibench.prom", &target).unwrap();
    dest.write(b"new 2\n").unwrap();
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "new 2\n");
}
