//! Hostile files and arguments (issue 28), through the binary: what `--save` and `plot -o` will
//! not replace (device nodes made with mknod in a temporary directory, never the host's /dev;
//! FIFOs, sockets, links), names checked before anything is measured, a full and a read-only
//! filesystem (tmpfs in a private mount namespace), inputs that would block or never end (FIFOs,
//! device nodes, sparse files) as saved runs and as sysfs files, numbers and control characters
//! in saved runs, counts above their caps, and the messages the issue found misleading. Every run
//! that could block has a watchdog that fails the test instead of hanging it. Cases that need
//! root (mknod, mount, setpriv) say so and are skipped without it.

use pcibench::pci::fixture::seed_tree;
use std::fs;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_pcibench")
}

fn root() -> bool {
    let r = rustix::process::geteuid().is_root();
    if !r {
        eprintln!("hostile: not root: the cases that need mknod, mount or setpriv did not run");
    }
    r
}

/// `pcibench args` in `dir` with `sysroot` for /, killed (and the test failed) if it has not
/// ended within two minutes: a read that blocks fails instead of hanging the test run.
fn run_at(dir: &Path, sysroot: &Path, args: &[&str]) -> Output {
    let child = Command::new(bin())
        .args(args)
        .current_dir(dir)
        .env("PCIBENCH_SYSROOT", sysroot)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run pcibench");
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    let (done, wait) = std::sync::mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        if wait.recv_timeout(Duration::from_secs(120)).is_err() {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            return true;
        }
        false
    });
    let o = child.wait_with_output().unwrap();
    let _ = done.send(());
    assert!(!watchdog.join().unwrap(), "pcibench {args:?} blocked: killed after 120 s");
    o
}

fn run(dir: &Path, args: &[&str]) -> Output {
    run_at(dir, Path::new("/nonexistent"), args)
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Exit `code` with one line on stderr containing every one of `want`.
fn refused(o: &Output, code: i32, want: &[&str]) -> String {
    let e = err(o);
    assert_eq!(o.status.code(), Some(code), "{e}");
    assert_eq!(e.lines().count(), 1, "one line: {e}");
    for w in want {
        assert!(e.contains(w), "wanted {w:?} in: {e}");
    }
    e
}

fn mknod(path: &Path, kind: rustix::fs::FileType, dev: (u32, u32)) {
    rustix::fs::mknodat(rustix::fs::CWD, path, kind, 0o666.into(), rustix::fs::makedev(dev.0, dev.1)).unwrap();
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../pcibench/tests/fixtures/results")
}

const PIO: [&str; 8] = ["pio", "sim", "--bar", "2", "--size", "4K", "--total", "64K"];

fn pio_save(dir: &Path, to: &str) -> Output {
    let mut args = PIO.to_vec();
    args.extend(["--save", to]);
    run(dir, &args)
}

#[test]
fn save_never_replaces_a_device_node_fifo_socket_or_link() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    let kind = |p: &str| fs::symlink_metadata(d.join(p)).unwrap().file_type();
    if root() {
        // /dev/null and /dev/full, made here: the host's /dev is never touched.
        mknod(&d.join("null"), rustix::fs::FileType::CharacterDevice, (1, 3));
        mknod(&d.join("full"), rustix::fs::FileType::CharacterDevice, (1, 7));
        for node in ["null", "full"] {
            let o = pio_save(d, node);
            refused(&o, 2, &["is a character device", "--save - and redirect stdout"]);
            assert!(o.stdout.is_empty(), "refused before anything was measured");
            assert!(kind(node).is_char_device(), "{node} is still the device node");
        }
    }
    mknod(&d.join("pipe"), rustix::fs::FileType::Fifo, (0, 0));
    refused(&pio_save(d, "pipe"), 2, &["is a FIFO"]);
    assert!(kind("pipe").is_fifo());
    let _listener = std::os::unix::net::UnixListener::bind(d.join("sock")).unwrap();
    refused(&pio_save(d, "sock"), 2, &["is a socket"]);
    fs::write(d.join("victim"), "precious\n").unwrap();
    std::os::unix::fs::symlink(d.join("victim"), d.join("link.json")).unwrap();
    refused(&pio_save(d, "link.json"), 2, &["is a symbolic link", "write to the link's target path instead"]);
    assert!(kind("link.json").is_symlink());
    assert_eq!(fs::read_to_string(d.join("victim")).unwrap(), "precious\n");
    // The temporary names of an earlier pcibench (.NAME.PID.tmp) planted as links to the victim
    // for the next 200 process ids (issue 29): the save creates its own file, follows none.
    let pid = std::process::id();
    for p in pid..pid + 200 {
        std::os::unix::fs::symlink(d.join("victim"), d.join(format!(".run.json.{p}.tmp"))).unwrap();
    }
    let o = pio_save(d, "run.json");
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(kind("run.json").is_file());
    assert_eq!(fs::read_to_string(d.join("victim")).unwrap(), "precious\n");
    // plot -o takes the same writer.
    let card = fixtures().join("card.json");
    let o = run(d, &["plot", card.to_str().unwrap(), "-o", "link.json"]);
    refused(&o, 2, &["is a symbolic link"]);
    assert_eq!(fs::read_to_string(d.join("victim")).unwrap(), "precious\n");
    // Stdout is the way to a device or a pipe: the saved run itself.
    let mut args = PIO.to_vec();
    args.extend(["--save", "-"]);
    let o = run(d, &args);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["format"], "pcibench-run");
    let leftovers: Vec<_> =
        fs::read_dir(d).unwrap().filter_map(|e| e.unwrap().file_name().into_string().ok()).collect();
    assert!(!leftovers.iter().any(|n| n.starts_with(".pcibench-")), "{leftovers:?}");
}

#[test]
fn save_checks_names_before_measuring() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    let o = pio_save(d, "");
    refused(&o, 2, &["--save '': an empty name"]);
    assert!(o.stdout.is_empty());
    refused(&pio_save(d, "no/such/dir/run.json"), 2, &["there is no directory no/such/dir"]);
    // 255 bytes is a valid name on ext4 and tmpfs; the temporary name is shorter, so it saves.
    let long = format!("{}.json", "r".repeat(250));
    let o = pio_save(d, &long);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let saved: serde_json::Value = serde_json::from_slice(&fs::read(d.join(&long)).unwrap()).unwrap();
    assert_eq!(saved["command"], "pio");
    let o = pio_save(d, &format!("{}.json", "r".repeat(251)));
    refused(&o, 2, &["the name is 256 bytes, more than the 255"]);
    assert!(o.stdout.is_empty());
}

/// A root-owned file in a sticky directory, saved over by another user: refused up front.
#[test]
fn a_file_in_a_sticky_directory_that_is_not_ours_is_refused_up_front() {
    if !root() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    fs::set_permissions(d, fs::Permissions::from_mode(0o755)).unwrap();
    fs::copy(bin(), d.join("pcibench")).unwrap();
    let sticky = d.join("tmp");
    fs::create_dir(&sticky).unwrap();
    fs::set_permissions(&sticky, fs::Permissions::from_mode(0o1777)).unwrap();
    fs::write(sticky.join("run.json"), "root's\n").unwrap();
    let as_nobody = || {
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(d.join("pcibench"))
            .args(PIO)
            .arg("--save")
            .arg(sticky.join("run.json"))
            .env("PCIBENCH_SYSROOT", "/nonexistent")
            .current_dir(d)
            .output()
            .expect("run setpriv")
    };
    // A test running beside this one may fork while the copy is open for writing (its child
    // holds the descriptor until it execs): ETXTBSY for a moment.
    let mut o = as_nobody();
    for _ in 0..100 {
        if !err(&o).contains("Text file busy") {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
        o = as_nobody();
    }
    let e = refused(&o, 2, &["belongs to uid 0 in a sticky directory", "choose another name"]);
    assert!(o.stdout.is_empty(), "{e}");
    assert_eq!(fs::read_to_string(sticky.join("run.json")).unwrap(), "root's\n");
}

/// A full filesystem leaves the old file and no temporary one; a read-only one is refused before
/// measuring, as read-only (not "permission denied"). tmpfs in a private mount namespace.
#[test]
fn full_and_read_only_filesystems() {
    if !root() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("fs");
    fs::create_dir(&d).unwrap();
    let script = r#"
        set -e
        mount -t tmpfs -o size=64k tmpfs "$1"
        printf old > "$1/x.svg"
        printf '%57000s' x > "$1/filler"
        set +e
        "$2" plot "$3" -o "$1/x.svg"; echo "plot rc=$?"
        echo "x.svg: $(cat "$1/x.svg")"
        echo "files: $(ls -A "$1" | tr '\n' ' ')"
        mount -o remount,ro "$1"
        "$2" pio sim --bar 2 --size 4K --total 64K --save "$1/run.json"; echo "save rc=$?"
    "#;
    let o = Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c", script, "sh"])
        .arg(&d)
        .arg(bin())
        .arg(fixtures().join("card.json"))
        .env("PCIBENCH_SYSROOT", "/nonexistent")
        .output()
        .expect("run unshare");
    let out = String::from_utf8_lossy(&o.stdout);
    let e = err(&o);
    assert!(out.contains("plot rc=1"), "{out} {e}");
    assert!(e.contains("no space left on the filesystem holding") && e.contains("nothing was written"), "{e}");
    assert!(out.contains("x.svg: old\n"), "the old file is whole: {out}");
    assert!(out.contains("files: filler x.svg \n"), "no temporary file left: {out}");
    assert!(out.contains("save rc=2") && !out.contains("BAR map"), "refused before measuring: {out}");
    assert!(e.contains("is read-only") && !e.contains("permission denied"), "{e}");
}

#[test]
fn plot_and_compare_refuse_what_cannot_be_a_saved_run_without_reading_it() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    let card = fixtures().join("card.json");
    let card = card.to_str().unwrap();
    mknod(&d.join("fifo.json"), rustix::fs::FileType::Fifo, (0, 0));
    refused(
        &run(d, &["plot", "fifo.json", "-o", "out.svg"]),
        2,
        &["fifo.json", "a FIFO (named pipe), not a regular file"],
    );
    refused(&run(d, &["compare", "fifo.json", card]), 2, &["a FIFO"]);
    refused(&run(d, &["compare", card, "fifo.json"]), 2, &["a FIFO"]);
    if root() {
        mknod(&d.join("zero"), rustix::fs::FileType::CharacterDevice, (1, 5));
        refused(&run(d, &["plot", "zero", "-o", "out.svg"]), 2, &["a character device, not a regular file"]);
    }
    fs::File::create(d.join("sparse.json")).unwrap().set_len(4 << 30).unwrap();
    refused(&run(d, &["plot", "sparse.json", "-o", "out.svg"]), 2, &["sparse.json is larger than 512 MiB"]);
    refused(&run(d, &["plot", ".", "-o", "out.svg"]), 2, &["a directory"]);
    assert!(!d.join("out.svg").exists());
}

#[test]
fn fifos_as_sysfs_files_never_block() {
    let t = tempfile::tempdir().unwrap();
    let root_dir = t.path().join("root");
    seed_tree(&root_dir);
    let dev = root_dir.join("sys/devices/pci0000:00/0000:15:00.0");
    fs::remove_file(dev.join("resource0")).unwrap();
    mknod(&dev.join("resource0"), rustix::fs::FileType::Fifo, (0, 0));
    let d = t.path();
    let o = run_at(d, &root_dir, &["info", "15:00.0"]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    // Every mapping: pio skips the one it cannot open, with the reason in its row.
    let o = run_at(d, &root_dir, &["pio", "15:00.0", "--bar", "0", "--size", "4K", "--total", "64K"]);
    assert_eq!(o.status.code(), Some(4), "{}", err(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("resource0: it is a FIFO (named pipe), not a regular file"));
    for args in [
        &["peek", "15:00.0", "0", "0"][..],
        &["pio", "15:00.0", "--bar", "0", "--map", "uc", "--size", "4K", "--total", "64K"],
        &["latency", "15:00.0", "--bar", "0", "--samples", "100"],
    ] {
        let o = run_at(d, &root_dir, args);
        let e = err(&o);
        assert_ne!(o.status.code(), Some(0), "{args:?}: {e}");
        assert_eq!(e.lines().count(), 1, "{args:?}: {e}");
        assert!(e.contains("resource0") && e.contains("FIFO"), "{args:?}: {e}");
    }
    // config as a FIFO: the link-health probe and config reads skip it; BAR2 is measured.
    fs::write(dev.join("resource2"), vec![0u8; 128 << 10]).unwrap();
    fs::remove_file(dev.join("config")).unwrap();
    mknod(&dev.join("config"), rustix::fs::FileType::Fifo, (0, 0));
    for args in [
        &["pio", "15:00.0", "--bar", "2", "--dir", "c2h", "--size", "4K", "--total", "64K"][..],
        &["latency", "15:00.0", "--bar", "2", "--samples", "100"],
    ] {
        let o = run_at(d, &root_dir, args);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", err(&o));
    }
}

#[test]
fn misleading_messages_say_what_is_wrong() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    let e = refused(&run(d, &["dma", "sim", "--size", "0"]), 2, &["--size 0: a transfer moves at least one byte"]);
    assert!(!e.contains("smaller"), "{e}");
    let e = refused(&run(d, &["bogus"]), 2, &["unrecognized subcommand 'bogus'", "(see pcibench --help)"]);
    assert!(!e.contains("bogus --help"), "{e}");
    // Two runs with no configuration in common: not "nothing was measured".
    for (map, file) in [("uc", "a.json"), ("wc", "b.json")] {
        let o = run(d, &["pio", "sim", "--bar", "2", "--map", map, "--size", "4K", "--total", "64K", "--save", file]);
        assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    }
    let o = run(d, &["compare", "a.json", "b.json"]);
    let e = refused(&o, 4, &["nothing to compare: no configuration was measured in both runs", "only in A"]);
    assert!(!e.contains("nothing was measured"), "{e}");
    // A 5,000-character argument is echoed clipped, not whole.
    let long = "A".repeat(5000);
    let e = refused(&run(d, &["pio", "sim", "--size", &long]), 2, &["invalid size", "characters)"]);
    assert!(e.len() < 400, "{} bytes: {e}", e.len());
    // An iommu_group link to a name that is no group number: sysfs is broken, not IOMMU-less.
    let root_dir = d.join("root");
    seed_tree(&root_dir);
    // 2d:00.0 is bound to vfio-pci, in group 85.
    let dev = root_dir.join("sys/devices/pci0000:00/0000:2d:00.0");
    fs::create_dir_all(root_dir.join("sys/kernel/iommu_groups/bogus")).unwrap();
    fs::remove_file(dev.join("iommu_group")).unwrap();
    std::os::unix::fs::symlink(root_dir.join("sys/kernel/iommu_groups/bogus"), dev.join("iommu_group")).unwrap();
    let o = run_at(d, &root_dir, &["pio", "2d:00.0", "--via", "vfio", "--total", "64K"]);
    let e = err(&o);
    assert!(e.contains("not an IOMMU group number") && !e.contains("no IOMMU"), "{e}");
    let o = run_at(d, &root_dir, &["info", "2d:00.0", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["warnings"].to_string().contains("not an IOMMU group number"), "{v}");
}

/// A saved run whose strings carry NUL and ESC: nothing prints them raw.
#[test]
fn control_characters_from_a_saved_run_never_reach_the_output_raw() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    let mut v: serde_json::Value = serde_json::from_slice(&fs::read(fixtures().join("card.json")).unwrap()).unwrap();
    v["context"]["hostname"] = "evil\u{1b}]0;owned\u{7}\u{1b}[2J\0".into();
    v["device"]["name"] = "Card \u{1b}[31mred\u{9b}1m".into();
    v["reports"][0]["results"][6]["notes"][0]["reason"] = "skipped\u{1b}[2K\nsecond line".into();
    v["reports"][1]["engine"] = "xdma\u{1b}[5m".into();
    fs::write(d.join("evil.json"), serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    let card = fixtures().join("card.json");
    let card = card.to_str().unwrap();
    for args in [
        &["compare", card, "evil.json"][..],
        &["compare", card, "evil.json", "--format", "csv"],
        &["compare", card, "evil.json", "--format", "json"],
        &["compare", "evil.json", "evil.json"],
        &["plot", "evil.json", card, "-o", "-"],
    ] {
        let o = run(d, args);
        assert!(o.status.code().is_some_and(|c| c < 100), "{args:?}: {}", err(&o));
        for (what, bytes) in [("stdout", &o.stdout), ("stderr", &o.stderr)] {
            let raw = bytes.iter().position(|b| *b == 0x1b || *b == 0 || *b == 0x07);
            assert_eq!(raw, None, "{args:?}: a raw control byte in {what}");
            let text = String::from_utf8_lossy(bytes);
            assert!(!text.contains('\u{9b}'), "{args:?}: a raw C1 control in {what}");
        }
    }
    let o = run(d, &["compare", card, "evil.json"]);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("evil␛]0;owned␇␛[2J␀"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
}

#[test]
fn counts_above_their_caps_are_refused_in_one_line() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    let max = u64::MAX.to_string();
    let sizes = vec!["4K"; 2000].join(",");
    for (args, want) in [
        (vec!["latency", "sim", "--samples", &max], "--samples 18446744073709551615 is more than pcibench takes"),
        (vec!["latency", "sim", "--warmup", &max], "--warmup 18446744073709551615 is more than"),
        (vec!["latency", "sim", "--dma", "--dma-samples", &max], "--dma-samples 18446744073709551615 is more than"),
        (vec!["latency", "sim", "--samples", "0"], "give at least one sample"),
        (vec!["dma", "sim", "--size", &sizes], "2000 sizes in one option"),
        (vec!["pio", "sim", "--total", &max], "more than pcibench moves per configuration"),
    ] {
        refused(&run(d, &args), 2, &[want]);
    }
}

/// Figures no measurement gives: refused in one line before any axis or allocation (the
/// 5e-324 cases panicked (exit 101) or allocated 2 GiB and aborted (134) under ulimit -v).
#[test]
fn absurd_numbers_in_saved_runs_are_refused_before_plotting() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    let card: serde_json::Value = serde_json::from_slice(&fs::read(fixtures().join("card.json")).unwrap()).unwrap();
    let lat: serde_json::Value = serde_json::from_slice(&fs::read(fixtures().join("latency.json")).unwrap()).unwrap();
    let mut cases: Vec<(&str, serde_json::Value, &str)> = Vec::new();
    let mut v = card.clone();
    v["reports"][1]["results"][0]["stats"]["median_mbps"] = 5e-324.into();
    cases.push(("median.json", v, "median_mbps is 5e-324"));
    let mut v = card.clone();
    v["reports"][1]["results"][0]["limit_mbps"] = 5e-324.into();
    cases.push(("limit.json", v, "limit_mbps is 5e-324"));
    let mut v = lat.clone();
    v["reports"][0]["results"][0]["latency"]["cdf"][0][0] = 5e-324.into();
    cases.push(("cdf.json", v, "a CDF latency is 5e-324"));
    let mut v = card.clone();
    v["reports"][0]["results"][0]["stats"]["p5_mbps"] = (-3.0).into();
    cases.push(("negative.json", v, "p5_mbps is -3e0"));
    for (name, v, want) in cases {
        fs::write(d.join(name), serde_json::to_vec(&v).unwrap()).unwrap();
        // Under a 3 GB address-space limit, as the issue ran it.
        let o = Command::new("sh")
            .args(["-c", "ulimit -v 3000000; exec \"$0\" plot \"$1\" -o out.svg", bin(), name])
            .current_dir(d)
            .output()
            .unwrap();
        refused(&o, 2, &[name, "is damaged", want]);
        refused(&run(d, &["compare", name, fixtures().join("card.json").to_str().unwrap()]), 2, &[want]);
    }
    assert!(!d.join("out.svg").exists());
}

/// Issue 55: the figures newer runs carry (engine counters, a stream row's packets a second, a
/// held load's rate, a note's figures) are checked as the others are: `plot`, `compare` and
/// `export` refuse each in one line naming report, row and field.
#[test]
fn the_newer_figures_of_saved_runs_are_checked_too() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    let save = |name: &str, args: &[&str]| -> serde_json::Value {
        let o = run(d, &[args, &["--save", name]].concat());
        assert!(o.status.success(), "{args:?}: {}", err(&o));
        serde_json::from_slice(&fs::read(d.join(name)).unwrap()).unwrap()
    };
    let dma = save("dma.json", &["dma", "sim", "--size", "4K", "--total", "1M"]);
    let st = save("st.json", &["dma", "sim-qdma-st", "--dir", "c2h", "--size", "4K", "--total", "1M"]);
    let load = save("load.json", &["latency", "sim", "--samples", "1000", "--load", "h2c", "--load-rate", "500MB/s"]);
    assert!(dma["reports"][0]["results"][0]["engine"]["busy_pct"].is_number(), "{dma}");
    assert!(st["reports"][0]["results"][0]["packets_per_s"].is_number(), "{st}");
    let held =
        load["reports"][0]["results"].as_array().unwrap().iter().position(|r| r["load"]["held_mbps"].is_number());
    let held = held.unwrap_or_else(|| panic!("a held load row: {load}"));
    type Set = Box<dyn Fn(&mut serde_json::Value)>;
    let cases: Vec<(&serde_json::Value, Set, &str)> = vec![
        (&dma, Box::new(|r| r["engine"]["busy_pct"] = (-1e308).into()), "row 1: engine busy_pct is -1e308"),
        (&dma, Box::new(|r| r["engine"]["engine_mbps"] = (-1.0).into()), "row 1: engine engine_mbps is -1e0"),
        (&dma, Box::new(|r| r["engine"]["clock_mhz"] = 1e308.into()), "row 1: engine clock_mhz is 1e308"),
        (
            &dma,
            Box::new(|r| r["engine"]["wall_s"] = 18446744073709551616.0.into()),
            "engine wall_s is 1.8446744073709552e19",
        ),
        (&dma, Box::new(|r| r["engine"]["wall_s"] = 5e-324.into()), "row 1: engine wall_s is 5e-324"),
        (
            &dma,
            Box::new(|r| r["notes"] = serde_json::json!([{"note": "noisy", "cv_pct": 1e308, "min_vs_median": 0.5}])),
            "row 1: a note's cv_pct is 1e308",
        ),
        (&st, Box::new(|r| r["packets_per_s"] = (-5.0).into()), "row 1: packets_per_s is -5e0"),
    ];
    let mut cases = cases;
    cases.push((&load, Box::new(move |r| r["load"]["held_mbps"] = 1e300.into()), "load held_mbps is 1e300"));
    for (i, (run_json, set, want)) in cases.into_iter().enumerate() {
        let mut v = run_json.clone();
        let row = if std::ptr::eq(run_json, &load) { held } else { 0 };
        set(&mut v["reports"][0]["results"][row]);
        let name = format!("bad{i}.json");
        fs::write(d.join(&name), serde_json::to_vec(&v).unwrap()).unwrap();
        let want: &[&str] = &[&name, "is damaged", "report 1", want];
        refused(&run(d, &["plot", &name, "-o", "out.svg"]), 2, want);
        refused(&run(d, &["compare", &name, "dma.json"]), 2, want);
        refused(&run(d, &["compare", "dma.json", &name]), 2, want);
        refused(&run(d, &["export", &name]), 2, want);
    }
    assert!(!d.join("out.svg").exists());
}

/// Issue 55: `export` holds a saved run's rows as the few figures it exports, never whole, and
/// writes as it goes: 10^5 rows (a 40 MB file) export under a 250 MB address-space limit, where
/// holding them took some 360 MB and aborted.
#[test]
fn export_of_many_rows_fits_in_a_small_address_space() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    let mut v: serde_json::Value = serde_json::from_slice(&fs::read(fixtures().join("card.json")).unwrap()).unwrap();
    let row = v["reports"][1]["results"][0].clone();
    let first =
        |field: &str| v["reports"][0]["results"].as_array().unwrap().iter().filter(|r| !r[field].is_null()).count();
    let (verified, measured) = (100_000 + first("verify"), 100_000 + first("stats"));
    let rows: Vec<serde_json::Value> = (0..100_000u64)
        .map(|i| {
            let mut r = row.clone();
            r["size"] = (8 + i % 4096).into();
            r
        })
        .collect();
    v["reports"][1]["results"] = rows.into();
    fs::write(d.join("many.json"), serde_json::to_vec(&v).unwrap()).unwrap();
    let o = Command::new("sh")
        .args(["-c", "ulimit -v 250000; exec \"$0\" export many.json -o many.prom", bin()])
        .current_dir(d)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", err(&o));
    let text = fs::read_to_string(d.join("many.prom")).unwrap();
    let rows = |prefix: &str| text.lines().filter(|l| l.starts_with(prefix)).count();
    // Every row of both reports, repeats numbered in order: size 8 B comes 25 times in 100,000
    // rows of sizes 8 B to 4103 B.
    assert_eq!(rows("pcibench_verified{"), verified);
    assert_eq!(rows("pcibench_throughput_bytes_per_second{"), 3 * measured);
    assert!(text.contains(" h2c 8 B #25\"") && !text.contains(" h2c 8 B #26\""), "repeats numbered");
}
