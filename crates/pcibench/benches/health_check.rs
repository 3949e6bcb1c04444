//! Self-timed benchmark of `pcibench health`'s check (`cargo bench -p pcibench --features fixtures
//! --bench health_check`): every function of a fixture host of 200 PCI Express functions (100 root
//! ports, each with an endpoint; link files, AER counters in both files, 256 bytes of config space
//! each), with a previous state to compare, and the table, JSON and Prometheus renderings. Target:
//! under 50 ms for the whole check. On this machine's own sysfs against `lspci -vvv` (whole
//! processes): scripts/bench-small-commands.

#[path = "common/mod.rs"]
mod common;

use pcibench::health::{self, state::State};
use pcibench::host::Host;
use std::time::Instant;

fn main() {
    let t = tempfile::tempdir().unwrap();
    pcibench::pci::fixture::health_fleet(t.path(), 200);
    let host = Host::with_root(t.path());
    let first = health::check(&host, &[], None).unwrap();
    assert_eq!(first.functions.len(), 200);
    let prev = State::next(&first.time, &first.states, None);
    let time = |what: &str, f: &mut dyn FnMut()| {
        f();
        let mut v: Vec<f64> = (0..30)
            .map(|_| {
                let s = Instant::now();
                f();
                s.elapsed().as_secs_f64() * 1e3
            })
            .collect();
        let m = common::median(&mut v);
        println!("{what:<52} {m:>8.2} ms (median of 30; min {:.2})", v[0]);
    };
    println!("health over {} fixture functions:", first.functions.len());
    time("check (sysfs, config space, AER, partners)", &mut || {
        std::hint::black_box(health::check(&host, &[], None).unwrap());
    });
    time("check with --state (and the diff)", &mut || {
        std::hint::black_box(health::check(&host, &[], Some(&prev)).unwrap());
    });
    let r = health::check(&host, &[], Some(&prev)).unwrap();
    time("render: table", &mut || {
        std::hint::black_box(pcibench::report::health::table(&r, None, false));
    });
    time("render: JSON", &mut || {
        std::hint::black_box(pcibench::report::json::to_json(&r).unwrap());
    });
    time("render: Prometheus text", &mut || {
        std::hint::black_box(pcibench::report::openmetrics::health(&r));
    });
}
