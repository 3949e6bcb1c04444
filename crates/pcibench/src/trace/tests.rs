//! The trace file on its own: every line JSON, the first naming pcibench, the last saying how the
//! run ended; identical reads folded into a count; the line limit; and the files it refuses.

use super::*;
use serde_json::Value;
use std::os::unix::fs::symlink;

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

fn tracer(dir: &tempfile::TempDir, limit: u64) -> (Tracer, PathBuf) {
    let path = dir.path().join("t.jsonl");
    (Tracer::create(&path, limit, &["pcibench".into(), "dma".into()]).unwrap(), path)
}

#[test]
fn every_access_is_a_json_line_between_the_header_and_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let (t, path) = tracer(&dir, 100);
    t.reg(Access::Write, 4, 0x4, Width::B32, 0x04ff_fe39);
    t.reg(Access::Read, 4, 0x40, Width::B32, 1);
    t.config(Access::Write, 4, &[0x06, 0x00]);
    t.descriptor("xdma", 0, 0x1000, &[0x13, 0x00, 0x4b, 0xad], &[("control", 0xad4b_0013), ("len", 4096)]);
    t.writeback("xdma", "writeback", 0x2000, Width::B32, 1);
    t.buffer("heap \"quoted\"", 4096, &[(0, 0x1000, 4096)], 1);
    t.note("error", "a line with \"quotes\" and \\ backslashes");
    let s = t.finish("ok", None).unwrap();
    let l = lines(&path);
    assert_eq!((s.lines, s.dropped, l.len()), (7, 0, 9));
    assert_eq!((l[0]["ev"].as_str(), l[0]["version"].as_u64()), (Some("trace"), Some(VERSION as u64)));
    assert_eq!(l[0]["command"], serde_json::json!(["pcibench", "dma"]));
    assert_eq!(l[1]["ev"], "write");
    assert_eq!((l[1]["bar"].as_u64(), l[1]["off"].as_str(), l[1]["w"].as_u64()), (Some(4), Some("0x4"), Some(32)));
    assert_eq!(l[1]["v"], "0x4fffe39");
    assert_eq!((l[2]["ev"].as_str(), l[2]["v"].as_str()), (Some("read"), Some("0x1")));
    assert_eq!(
        (l[3]["ev"].as_str(), l[3]["w"].as_u64(), l[3]["v"].as_str()),
        (Some("config-write"), Some(16), Some("0x6"))
    );
    assert_eq!((l[4]["bytes"].as_str(), l[4]["fields"]["len"].as_str()), (Some("13004bad"), Some("0x1000")));
    assert_eq!((l[5]["ev"].as_str(), l[5]["bus"].as_str()), (Some("wb"), Some("0x2000")));
    assert_eq!(l[6]["what"], "heap \"quoted\"");
    assert_eq!(l[7]["text"], "a line with \"quotes\" and \\ backslashes");
    let times: Vec<u64> = l[1..].iter().map(|x| x["t"].as_u64().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "time runs forward: {times:?}");
    assert_eq!(
        (l[8]["ev"].as_str(), l[8]["outcome"].as_str(), l[8]["lines"].as_u64()),
        (Some("end"), Some("ok"), Some(7))
    );
}

#[test]
fn interrupts_are_a_routing_line_a_line_per_wait_that_collected_signals_and_a_teardown_line() {
    let dir = tempfile::tempdir().unwrap();
    let (t, path) = tracer(&dir, 100);
    t.irq_route("MSI-X", 4, "MSI-X vectors 0-3 (VFIO eventfd)");
    t.irq("MSI-X", &[0, 2, 0, 1]);
    t.irq_off("MSI-X");
    t.finish("ok", None).unwrap();
    let l = lines(&path);
    assert_eq!((l[1]["ev"].as_str(), l[1]["vectors"].as_u64()), (Some("irq-route"), Some(4)));
    assert_eq!(l[1]["what"], "MSI-X vectors 0-3 (VFIO eventfd)");
    assert_eq!((l[2]["ev"].as_str(), l[2]["kind"].as_str(), l[2]["n"].as_u64()), (Some("irq"), Some("MSI-X"), Some(3)));
    assert_eq!(l[2]["vectors"], serde_json::json!([[1, 2], [3, 1]]), "only the vectors that fired");
    assert_eq!((l[3]["ev"].as_str(), l[3]["kind"].as_str()), (Some("irq-off"), Some("MSI-X")));
}

#[test]
fn a_register_polled_to_the_same_value_is_one_line_and_a_count() {
    let dir = tempfile::tempdir().unwrap();
    let (t, path) = tracer(&dir, 100);
    for _ in 0..5 {
        t.reg(Access::Read, 0, 0x98, Width::B32, 1);
    }
    t.reg(Access::Read, 0, 0x98, Width::B32, 0);
    t.reg(Access::Read, 0, 0x98, Width::B32, 0);
    // Another register, and a write, end a run of repeats too.
    t.reg(Access::Read, 0, 0x24, Width::B32, 0);
    t.reg(Access::Write, 0, 0x64, Width::B32, 0x100);
    t.reg(Access::Write, 0, 0x64, Width::B32, 0x100);
    t.finish("ok", None).unwrap();
    let evs: Vec<(String, String)> = lines(&path)[1..]
        .iter()
        .map(|l| {
            (
                l["ev"].as_str().unwrap().to_string(),
                l.get("v").or(l.get("n")).map(|v| v.to_string()).unwrap_or_default(),
            )
        })
        .collect();
    let want = [
        ("read", "\"0x1\""),
        ("repeat", "4"),
        ("read", "\"0x0\""),
        ("repeat", "1"),
        ("read", "\"0x0\""),
        ("write", "\"0x100\""),
        ("write", "\"0x100\""),
        ("end", ""),
    ];
    assert_eq!(evs, want.map(|(a, b)| (a.to_string(), b.to_string())));
}

#[test]
fn a_poll_that_never_ends_still_shows_its_count() {
    let dir = tempfile::tempdir().unwrap();
    let (t, path) = tracer(&dir, 100);
    for _ in 0..=REPEAT_EVERY {
        t.reg(Access::Read, 0, 0x98, Width::B32, 1);
    }
    // Nothing else came, and the file already says how long the poll went on.
    let l = lines(&path);
    assert_eq!((l.len(), l[2]["ev"].as_str(), l[2]["n"].as_u64()), (3, Some("repeat"), Some(REPEAT_EVERY)));
    drop(t);
}

#[test]
fn past_its_limit_a_trace_says_so_once_and_counts_what_it_left_out() {
    let dir = tempfile::tempdir().unwrap();
    let (t, path) = tracer(&dir, 3);
    for i in 0..10 {
        t.reg(Access::Write, 0, 8 * i, Width::B64, i);
    }
    let s = t.finish("interrupted", Some("stopped by the user")).unwrap();
    assert_eq!((s.lines, s.dropped), (3, 7));
    let l = lines(&path);
    let evs: Vec<&str> = l.iter().map(|x| x["ev"].as_str().unwrap()).collect();
    assert_eq!(evs, ["trace", "write", "write", "write", "capped", "end"]);
    assert_eq!((l[5]["outcome"].as_str(), l[5]["dropped"].as_u64()), (Some("interrupted"), Some(7)));
    assert_eq!(l[5]["detail"], "stopped by the user");
}

#[test]
fn a_trace_nobody_finished_still_ends_with_a_line_saying_so() {
    let dir = tempfile::tempdir().unwrap();
    let (t, path) = tracer(&dir, 10);
    t.reg(Access::Read, 0, 0, Width::B32, 0x0100_00ed);
    let clone = t.clone();
    drop(t);
    clone.stop("edu");
    drop(clone);
    let l = lines(&path);
    let evs: Vec<&str> = l.iter().map(|x| x["ev"].as_str().unwrap()).collect();
    assert_eq!(evs, ["trace", "read", "stop", "end"]);
    assert_eq!(l[3]["outcome"], "unfinished");
}

#[test]
fn a_regular_file_is_overwritten_and_anything_else_refused_before_it_is_opened() {
    let dir = tempfile::tempdir().unwrap();
    let old = dir.path().join("old.jsonl");
    std::fs::write(&old, "x".repeat(10_000)).unwrap();
    let t = Tracer::create(&old, 10, &[]).unwrap();
    t.finish("ok", None).unwrap();
    assert_eq!(lines(&old).len(), 2, "the old content is gone");

    let target = dir.path().join("target");
    std::fs::write(&target, "keep").unwrap();
    let link = dir.path().join("link.jsonl");
    symlink(&target, &link).unwrap();
    let dangling = dir.path().join("dangling.jsonl");
    symlink(dir.path().join("nowhere"), &dangling).unwrap();
    let hard = dir.path().join("hard.jsonl");
    std::fs::hard_link(&target, &hard).unwrap();
    let fifo = dir.path().join("fifo");
    rustix::fs::mknodat(rustix::fs::CWD, &fifo, rustix::fs::FileType::Fifo, rustix::fs::Mode::from_raw_mode(0o600), 0)
        .unwrap();
    for (path, kind) in [
        (&link, "symbolic link"),
        (&dangling, "symbolic link"),
        (&hard, "other hard links"),
        (&fifo, "FIFO"),
        (&dir.path().to_path_buf(), "directory"),
        (&PathBuf::from("/dev/null"), "device node"),
    ] {
        let e = Tracer::create(path, 10, &[]).unwrap_err().to_string();
        assert!(e.starts_with("--trace ") && e.contains(kind) && e.contains("a regular file or a new name"), "{e}");
        assert!(matches!(check_destination("--trace", path), Err(Error::Usage(_))), "{}", path.display());
    }
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep", "nothing was written through the link");
    assert!(!dir.path().join("nowhere").exists(), "nothing was created where the dangling link points");
}

/// A deferred trace makes no file until it is committed, then holds every line from the first;
/// finished uncommitted, it leaves no file and says so.
#[test]
fn a_deferred_trace_makes_its_file_only_when_committed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.jsonl");
    let t = Tracer::deferred(&path, 100, &["pcibench".into()]).unwrap();
    t.reg(Access::Write, 0, 0x4, Width::B32, 1);
    assert!(!path.exists(), "nothing on disk before the commit");
    t.commit().unwrap();
    t.reg(Access::Read, 0, 0x8, Width::B32, 2);
    let s = t.finish("ok", None).unwrap();
    assert!(s.written && s.lines == 2, "{s:?}");
    let l = lines(&path);
    let evs: Vec<&str> = l.iter().map(|x| x["ev"].as_str().unwrap()).collect();
    assert_eq!(evs, ["trace", "write", "read", "end"]);

    let other = dir.path().join("u.jsonl");
    let t = Tracer::deferred(&other, 100, &[]).unwrap();
    t.reg(Access::Write, 0, 0x4, Width::B32, 1);
    let s = t.finish("usage", Some("bad --total")).unwrap();
    assert!(!s.written);
    drop(t);
    assert!(!other.exists(), "never committed: no file, not even at drop");
}
