use super::state::{self, State};
use super::*;
use crate::pci::fixture::{
    health_degrade, health_down, health_errors, health_memory_off, health_retrain, health_tree, Fixture, ENDPOINT,
    ROOT_PORT,
};

fn tree() -> (tempfile::TempDir, Fixture, Host) {
    let t = tempfile::tempdir().unwrap();
    let f = health_tree(t.path());
    let h = Host::with_root(t.path());
    (t, f, h)
}

fn run(h: &Host, prev: Option<&State>) -> HealthReport {
    check(h, &[], prev).unwrap()
}

fn state_of(r: &HealthReport) -> State {
    State::next(&r.time, &r.states, None)
}

fn f<'a>(r: &'a HealthReport, addr: &str) -> &'a FunctionHealth {
    r.functions.iter().find(|x| x.address == addr).unwrap_or_else(|| panic!("{addr} not checked"))
}

fn changes(r: &HealthReport) -> Vec<(Level, String)> {
    r.changes.as_ref().expect("a previous run").iter().map(|c| (c.level, c.what.clone())).collect()
}

#[test]
fn a_healthy_host_every_pcie_function_and_which_end_limits() {
    let (_t, _f, h) = tree();
    let r = run(&h, None);
    assert_eq!(r.status, Status::Healthy);
    assert_eq!(r.status.code(), 0);
    let addrs: Vec<&str> = r.functions.iter().map(|x| x.address.as_str()).collect();
    assert_eq!(addrs, ["0000:00:1c.0", "0000:00:1d.0", "0000:00:1e.0", "0000:03:00.0", "0000:04:00.0"]);
    assert_eq!(r.without_link, 1, "the host bridge has no link");
    assert!(r.functions.iter().all(|x| x.findings.is_empty()), "{:?}", r.functions);
    // An x8 card in a slot wired x4: the port limits it, and that is not degraded.
    let nic = f(&r, "0000:04:00.0").link.as_ref().unwrap();
    assert_eq!((nic.current_width, nic.max_width, nic.limit_width), (Some(4), Some(8), Some(4)));
    assert!(!nic.degraded);
    assert_eq!(nic.limited_by.as_deref(), Some("speed: both ends, width: the upstream port 0000:00:1d.0"));
    // An empty slot's port: no partner, so neither down nor degraded.
    let empty = f(&r, "0000:00:1e.0").link.as_ref().unwrap();
    assert_eq!((empty.up, empty.partner.as_deref(), empty.degraded), (None, None, false));
    // Root reads 256 bytes: the status registers are there, nothing set.
    let ep = f(&r, "0000:03:00.0");
    assert_eq!(ep.device_status, Some(vec![]));
    assert_eq!(ep.link_status, Some(vec![]));
    assert_eq!(ep.link.as_ref().unwrap().up, Some(true));
    assert_eq!(ep.port_type.as_deref(), Some("Endpoint"));
    assert!(r.changes.is_none());
}

#[test]
fn a_degraded_link_is_a_warning_by_lspcis_rule() {
    let (_t, fx, h) = tree();
    health_degrade(&fx);
    let r = run(&h, None);
    assert_eq!(r.status, Status::Warning);
    let ep = f(&r, "0000:03:00.0");
    assert_eq!(ep.findings.len(), 1);
    assert_eq!(ep.findings[0].level, Level::Warning);
    assert_eq!(
        ep.findings[0].what,
        "link degraded: trained at Gen1 x8, below the Gen3 x8 both ends support (limited by both ends)"
    );
    assert!(f(&r, "0000:04:00.0").findings.is_empty(), "a link the slot limits is not degraded");
}

#[test]
fn counters_in_both_naming_styles_growing_between_two_runs() {
    let (_t, fx, h) = tree();
    let first = run(&h, None);
    let port = f(&first, "0000:00:1c.0").aer.clone().unwrap();
    assert!(port.iter().any(|c| c.kind == "Header Log Overflow"), "long names on the port");
    assert!(port.iter().any(|c| c.severity == "rootport_nonfatal" && c.kind == "total"));
    let ep = f(&first, "0000:03:00.0").aer.clone().unwrap();
    assert!(ep.iter().any(|c| c.kind == "HeaderOF"), "short names on the endpoint");
    let st = state_of(&first);

    health_errors(&fx, false);
    let r = run(&h, Some(&st));
    assert_eq!(
        changes(&r),
        [
            (Level::Failure, "2 non-fatal errors (2 CmpltAbrt) on 0000:00:1c.0".to_string()),
            (Level::Warning, "3 correctable errors (3 BadTLP) on 0000:03:00.0".to_string()),
        ]
    );
    assert_eq!(r.status, Status::Failure);
    assert_eq!(r.status.code(), 2);
    assert!(r.functions.iter().all(|x| x.findings.is_empty()), "with a previous run, counts since boot are no finding");

    // The next run compares with this one: nothing grew, healthy again.
    let again = run(&h, Some(&state_of(&r)));
    assert_eq!(again.status, Status::Healthy);
    assert_eq!(changes(&again), []);
}

#[test]
fn correctable_errors_alone_are_a_warning_and_fatal_ones_a_failure() {
    let (_t, fx, h) = tree();
    let st = state_of(&run(&h, None));
    fx.at("0000:03:00.0").aer(false, 1, 0, 0, false);
    let r = run(&h, Some(&st));
    assert_eq!((r.status, r.status.code()), (Status::Warning, 1));
    health_errors(&fx, true);
    let r = run(&h, Some(&st));
    assert!(changes(&r).contains(&(Level::Failure, "1 fatal error (1 DLP) on 0000:00:1c.0".to_string())));
    // Without a previous run, errors counted since boot are a warning, never a failure.
    let r = run(&h, None);
    assert_eq!(r.status, Status::Warning);
    let w: Vec<&str> = f(&r, "0000:00:1c.0").findings.iter().map(|x| x.what.as_str()).collect();
    assert_eq!(
        w,
        [
            "2 non-fatal errors counted since boot (keep a --state file to see when they grow)",
            "1 fatal error counted since boot (keep a --state file to see when they grow)"
        ]
    );
}

#[test]
fn a_link_that_retrained_is_a_warning() {
    let (_t, fx, h) = tree();
    let st = state_of(&run(&h, None));
    health_retrain(&fx);
    let r = run(&h, Some(&st));
    assert_eq!(r.status, Status::Warning);
    assert_eq!(
        changes(&r),
        [
            (Level::Warning, "link of 0000:00:1d.0 retrained from 8.0 GT/s PCIe x4 to 5.0 GT/s PCIe x4".to_string()),
            (Level::Warning, "0000:00:1d.0 changed its link bandwidth on its own (Link Status LBMS/LABS)".to_string()),
            (Level::Warning, "link of 0000:04:00.0 retrained from 8.0 GT/s PCIe x4 to 5.0 GT/s PCIe x4".to_string()),
        ]
    );
    assert_eq!(f(&r, "0000:00:1d.0").link_status, Some(vec!["BWMgmt"]));
    // Gen2 where both ends support Gen3: degraded now, as well.
    assert!(f(&r, "0000:04:00.0").findings[0].what.starts_with("link degraded: trained at Gen2 x4, below the Gen3 x4"));
}

#[test]
fn a_link_down_and_a_function_gone_are_failures() {
    let (_t, fx, h) = tree();
    let st = state_of(&run(&h, None));
    health_down(&fx);
    let r = run(&h, Some(&st));
    assert_eq!(r.status, Status::Failure);
    assert!(
        changes(&r).contains(&(Level::Failure, "link of 0000:00:1c.0 went down (was 8.0 GT/s PCIe x8)".to_string()))
    );
    let port = f(&r, "0000:00:1c.0");
    assert_eq!(port.findings[0].what, "link down (speed Unknown, width 0) with 0000:03:00.0 at the other end");
    let ep = f(&r, "0000:03:00.0");
    assert!(ep.findings[0].what.starts_with("does not answer config reads"), "{:?}", ep.findings);

    // The endpoint removed from sysfs since the previous run.
    let (_t2, fx2, h2) = tree();
    let st = state_of(&run(&h2, None));
    std::fs::remove_file(fx2.root().join("sys/bus/pci/devices/0000:04:00.0")).unwrap();
    let r = run(&h2, Some(&st));
    assert_eq!(
        changes(&r),
        [(
            Level::Failure,
            "0000:04:00.0 is gone since the previous run (removed, or it fell off the bus: link down?)".to_string()
        )]
    );
}

#[test]
fn device_status_bits_newly_set_and_what_an_unprivileged_reader_cannot_see() {
    let (_t, fx, h) = tree();
    let st = state_of(&run(&h, None));
    // DevSta: correctable and non-fatal error detected.
    fx.at("0000:03:00.0").pcie(ENDPOINT, (3, 8), (3, 8), 0b0011, 0);
    let r = run(&h, Some(&st));
    assert_eq!(f(&r, "0000:03:00.0").device_status, Some(vec!["CorrErr", "NonFatalErr"]));
    assert_eq!(
        changes(&r),
        [
            (Level::Failure, "0000:03:00.0 reported a non-fatal error (Device Status)".to_string()),
            (Level::Warning, "0000:03:00.0 reported a correctable error (Device Status)".to_string()),
        ]
    );
    // 64 bytes, as an unprivileged reader gets: the status registers are not readable, not zero.
    let cfg = crate::pci::fixture::pcie_config(ROOT_PORT, (3, 8), (3, 8), 0, 0);
    fx.at("0000:00:1c.0").config(&cfg[..64]);
    let r = run(&h, None);
    let port = f(&r, "0000:00:1c.0");
    assert_eq!((port.device_status.clone(), port.link_status.clone()), (None, None));
    assert_eq!(port.port_type, None);
    assert!(port.link.is_some(), "the link still comes from sysfs");
}

#[test]
fn named_devices_bring_the_ports_above_them_and_keep_the_others_state() {
    let (_t, fx, h) = tree();
    let all = run(&h, None);
    let r = check(&h, &["03:00.0".parse().unwrap()], None).unwrap();
    let got: Vec<(&str, bool)> = r.functions.iter().map(|x| (x.address.as_str(), x.named)).collect();
    assert_eq!(got, [("0000:00:1c.0", false), ("0000:03:00.0", true)]);
    // A run on one device keeps the other functions' previous state for the next full run.
    let st = State::next(&r.time, &r.states, Some(&state_of(&all)));
    assert_eq!(st.functions.len(), all.functions.len());
    health_retrain(&fx);
    let r2 = check(&h, &["03:00.0".parse().unwrap()], Some(&st)).unwrap();
    assert_eq!(changes(&r2), [], "a change outside the named devices is not theirs");
    let e = check(&h, &["0000:09:00.0".parse().unwrap()], None).unwrap_err();
    assert!(matches!(e, Error::Usage(_)) && e.to_string().contains("no PCI device 0000:09:00.0"), "{e}");
}

#[test]
fn the_state_file_round_trips_and_refuses_what_it_is_not() {
    let (t, _f, h) = tree();
    let p = t.path().join("health.state");
    assert!(state::read(&p).unwrap().is_none(), "the first run has none");
    std::fs::write(&p, "").unwrap();
    assert!(state::read(&p).unwrap().is_none(), "an empty file is a first run");
    let r = run(&h, None);
    state::write(&p, &state_of(&r)).unwrap();
    let back = state::read(&p).unwrap().unwrap();
    assert_eq!(back.functions, {
        let mut s = r.states.clone();
        s.sort_by(|a, b| a.addr.cmp(&b.addr));
        s
    });
    for (text, want) in [
        ("{\"format\": \"pcibench-run\", \"version\": 1}", "not a pcibench health state"),
        ("not json", "not a pcibench health state"),
        ("{\"format\": \"pcibench-health-state\", \"version\": 9, \"time\": \"\", \"functions\": []}", "version 9"),
        ("{\"format\": \"pcibench-health-state\", \"version\": 1}", "damaged"),
    ] {
        std::fs::write(&p, text).unwrap();
        let e = state::read(&p).unwrap_err();
        assert!(matches!(e, Error::Usage(_)) && e.to_string().contains(want), "{text}: {e}");
        assert_eq!(std::fs::read_to_string(&p).unwrap(), text, "left as it is");
    }
}

#[test]
fn an_integrated_endpoint_has_no_link_to_judge() {
    let (_t, fx, h) = tree();
    // QEMU's NVMe on q35's root bus: sysfs link files reading Unknown x0, LnkCap garbage.
    fx.device("0000:00:08.0").ids(0x1b36, 0x0010, 0x1af4, 0x1100).class(0x010802).driver("nvme").pcie(
        9,
        (1, 63),
        (1, 0),
        0,
        0,
    );
    let r = run(&h, None);
    let nvme = f(&r, "0000:00:08.0");
    assert_eq!(nvme.port_type.as_deref(), Some("Root Complex Integrated Endpoint"));
    assert!(nvme.link.is_none() && nvme.findings.is_empty(), "{nvme:?}");
    // A user sees no port type: on the root bus, no bridge, its link reading down: the same.
    let cfg = crate::pci::fixture::pcie_config(9, (1, 63), (1, 0), 0, 0);
    fx.at("0000:00:08.0").config(&cfg[..64]);
    let r = run(&h, None);
    assert!(f(&r, "0000:00:08.0").link.is_none());
    assert_eq!(r.status, Status::Healthy);
}

/// Every function's Command register is read and shown; an endpoint whose driver stays bound
/// while its Memory Space Enable is cleared (issue 37: another process, or a reset) is a failure
/// named as such, and the state diff names the change; a bridge without memory BARs, or a
/// function no driver holds, is not flagged for it.
#[test]
fn memory_space_cleared_under_a_bound_driver_is_named() {
    let (_t, fx, h) = tree();
    let first = run(&h, None);
    let ep = f(&first, "0000:03:00.0");
    let c = ep.command.expect("the command register is within the 64 bytes anyone reads");
    assert_eq!((c.value, c.memory, c.bus_master, c.intx_disable), (0x0006, true, true, false));
    assert_eq!(c.words(), "Mem+ BusMaster+ DisINTx-");
    assert!(ep.findings.is_empty(), "{:?}", ep.findings);

    health_memory_off(&fx);
    let r = run(&h, Some(&state_of(&first)));
    assert_eq!(r.status, Status::Failure);
    let ep = f(&r, "0000:03:00.0");
    assert_eq!(ep.command.unwrap().words(), "Mem- BusMaster+ DisINTx-");
    let what: Vec<&str> = ep.findings.iter().map(|x| x.what.as_str()).collect();
    assert_eq!(
        what,
        ["Memory Space is off: the BARs of 0000:03:00.0 do not answer (a reset or another process cleared it)"]
    );
    assert_eq!(ep.findings[0].level, Level::Failure);
    assert_eq!(
        changes(&r),
        [(
            Level::Failure,
            "Memory Space Enable of 0000:03:00.0 was cleared (command register 0x0006 to 0x0004): its BARs do not answer (a reset, or another process cleared it)".to_string()
        )]
    );
    let table = crate::report::health::table(&r, None, false);
    assert!(table.lines().nth(1).unwrap().contains("COMMAND"), "{table}");
    assert!(table.contains("Mem- BusMaster+ DisINTx-"), "{table}");

    // Without a driver, or on a port with no memory BARs, Memory Space off is no finding.
    fx.at("0000:00:1d.0").config(&{
        let mut c = crate::pci::fixture::pcie_config(ROOT_PORT, (3, 4), (3, 4), 0, 0);
        c[4] = 0;
        c
    });
    std::fs::remove_file(fx.at("0000:03:00.0").dir.join("driver")).unwrap();
    let r = run(&h, None);
    assert!(f(&r, "0000:03:00.0").findings.is_empty());
    assert!(f(&r, "0000:00:1d.0").findings.is_empty());
    assert_eq!(f(&r, "0000:00:1d.0").command.unwrap().words(), "Mem- BusMaster- DisINTx-");
}

/// A state file written before the Command register was kept still reads, and compares nothing
/// about it.
#[test]
fn an_older_state_without_the_command_register_still_compares() {
    let (_t, fx, h) = tree();
    let mut st = state_of(&run(&h, None));
    for x in &mut st.functions {
        x.command = None;
    }
    let json = serde_json::to_string(&st).unwrap().replace(",\"command\":null", "");
    assert!(!json.contains("command"), "{json}");
    let old: State = serde_json::from_str(&json).unwrap();
    health_memory_off(&fx);
    let r = run(&h, Some(&old));
    assert!(changes(&r).is_empty(), "{:?}", changes(&r));
}

/// Issue 56: the physical slot a function sits in, from sysfs, as a SLOT column that appears only
/// when some function has one.
#[test]
fn a_physical_slot_gets_a_column_of_its_own() {
    let (t, _f, h) = tree();
    let before = crate::report::health::table(&run(&h, None), None, false);
    assert!(!before.contains("SLOT"), "{before}");
    std::fs::create_dir_all(t.path().join("sys/bus/pci/slots/3")).unwrap();
    std::fs::write(t.path().join("sys/bus/pci/slots/3/address"), "0000:03:00\n").unwrap();
    let r = run(&h, None);
    assert_eq!(f(&r, "0000:03:00.0").slot.as_ref().map(|s| s.name.as_str()), Some("3"));
    assert_eq!(f(&r, "0000:04:00.0").slot, None);
    let table = crate::report::health::table(&r, None, false);
    let header = table.lines().nth(1).unwrap();
    assert!(header.starts_with("DEVICE        SLOT  IDS"), "{table}");
    let row = table.lines().find(|l| l.starts_with("0000:03:00.0")).unwrap();
    assert!(row.starts_with("0000:03:00.0  3     10ee:7024"), "{table}");
}
