//! The simulated cards give the same figures on a busy host as on an idle one (issue 52): their
//! engines progress with time at their declared datapath whenever the host looks, so no figure
//! waits for a second thread to get a CPU. Each card's DMA medians, and the DMA latency's p50,
//! are measured without and then with two CPU hogs pinned to every CPU, in the same test, and
//! compared as a ratio (not a timing: the same host measures both).

mod common;

use common::{json, pcibench};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// How much worse the busy run's figure may be than the idle run's (issue 52: a figure that
/// measures the scheduler was 10-100x worse under two hogs). One-sided: other work on a shared CI
/// host (a neighbour's compile, a lab guest) can make the idle run the unlucky one (seen: idle
/// 3930 MB/s, busy 6037), which says nothing about load.
const RATIO: f64 = 1.5;
/// The same for a row the host path bounds (its idle figure under `MODEL_BOUND` of the model's
/// datapath): that figure is the host's copy, which load legitimately slows (a hog on the SMT
/// sibling or a neighbour's memory traffic: sim-qdma's 64 KiB h2c went from 12679 MB/s, 79% of its
/// model, to 8277 with two external hogs and two of the test's), so only the 10-100x defect fails it.
const HOST_BOUND_RATIO: f64 = 2.0;
/// A row at this share of its model's datapath or more is the model's figure, not the host's.
const MODEL_BOUND: f64 = 90.0;
/// The same for a latency p50, which is a histogram bucket's value: a few µs apart, neighbouring
/// buckets differ by up to 1.5x (seen: 5631 ns idle, 8639 ns busy on sim-nvram), so one bucket's
/// difference must not fail it; what it guards against is still 10-100x.
const LATENCY_RATIO: f64 = 2.0;

/// One test at a time: one's hogs must not load the other's idle run.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Two busy loops pinned to each CPU this process may use, until dropped.
struct Hogs {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Hogs {
    fn start() -> Hogs {
        let stop = Arc::new(AtomicBool::new(false));
        let cpus = pcibench::os::cpu::process_cpus();
        let threads = cpus
            .iter()
            .flat_map(|&cpu| [cpu, cpu])
            .map(|cpu| {
                let stop = Arc::clone(&stop);
                std::thread::spawn(move || {
                    let _ = pcibench::os::cpu::pin_current_thread(cpu);
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        Hogs { stop, threads }
    }
}

impl Drop for Hogs {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// (row, figure, efficiency %) of every result of `pcibench args --json`, by `field` (a JSON
/// pointer); the efficiency is 100 where the row gives none.
fn figures(args: &[&str], field: &str) -> Vec<(String, f64, f64)> {
    let t = tempfile::tempdir().unwrap();
    let mut all: Vec<&str> = args.to_vec();
    all.push("--json");
    let v = json(&pcibench(t.path(), &all));
    let rows = v["results"].as_array().unwrap_or_else(|| panic!("{args:?}: {v}"));
    rows.iter()
        // `latency` also times single register reads: its DMA rows alone are the engine's.
        .filter(|r| r.pointer(field).is_some() && r["probe"].as_str().is_none_or(|p| p == "dma"))
        .map(|r| {
            let name = format!("{} {}", r["dir"].as_str().unwrap_or("?"), r["size"]);
            assert_eq!(r["verify"]["status"], "ok", "{args:?} {name}: {r}");
            let eff = r["efficiency_pct"].as_f64().unwrap_or(100.0);
            (name, r.pointer(field).and_then(|x| x.as_f64()).unwrap(), eff)
        })
        .collect()
}

/// Runs each way, interleaved: idle, busy, idle, busy, ...
const ROUNDS: usize = 3;

/// The figures of `args` idle and under the hogs, each row's best (`higher`: the larger) of
/// `ROUNDS` runs each way, interleaved; every row no more than `RATIO` worse busy than idle. A process's own
/// circumstances move a small transfer's figure by up to 1.6x from one run to the next, load or
/// not: on a 2-vCPU VM shared with other builds, `latency sim-qdma --dma --size 64` gave a p50 of
/// 3.0 or 4.8 µs from one idle run to the next (a neighbour's compile on the other hyperthread of
/// the host's core, where a hog's spin loop leaves it room). Interleaved runs, the best of each
/// way, keep that out of the load's comparison.
fn same_when_busy(args: &[&str], field: &str, higher: bool) {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    type Rows = Vec<(String, f64, f64)>;
    let best = |a: Option<Rows>, b: Rows| match a {
        None => b,
        Some(a) => {
            assert_eq!(a.len(), b.len(), "{args:?}");
            let pick = |(n, x, e): (String, f64, f64), (_, y, f): (String, f64, f64)| {
                let first = if higher { x >= y } else { x <= y };
                if first {
                    (n, x, e)
                } else {
                    (n, y, f)
                }
            };
            a.into_iter().zip(b).map(|(x, y)| pick(x, y)).collect()
        }
    };
    let (mut idle, mut busy) = (None, None);
    for _ in 0..ROUNDS {
        idle = Some(best(idle, figures(args, field)));
        let hogs = Hogs::start();
        busy = Some(best(busy, figures(args, field)));
        drop(hogs);
    }
    let (idle, busy) = (idle.unwrap_or_default(), busy.unwrap_or_default());
    assert_eq!(idle.len(), busy.len(), "{args:?}");
    assert!(!idle.is_empty(), "{args:?}: no rows");
    for ((name, a, eff), (_, b, _)) in idle.iter().zip(&busy) {
        // Worse under load: lower throughput, or higher latency.
        let worse = if higher { a / b } else { b / a };
        eprintln!(
            "{args:?} {name}: idle {a:.1} ({eff:.0}% of the model), two hogs a CPU {b:.1} (x{worse:.2} worse busy)"
        );
        let bound = match (higher, *eff >= MODEL_BOUND) {
            (false, _) => LATENCY_RATIO,
            (true, true) => RATIO,
            (true, false) => HOST_BOUND_RATIO,
        };
        assert!(worse <= bound, "{args:?} {name}: idle {a:.1}, busy {b:.1}: {worse:.2}x worse under load");
    }
}

#[test]
fn every_sim_cards_dma_medians_hold_on_a_busy_host() {
    for card in ["sim", "sim-qdma", "sim-nvram", "sim-xdma-st", "sim-qdma-st"] {
        same_when_busy(&["dma", card, "--size", "64K,1M", "--total", "16M"], "/stats/median_mbps", true);
    }
}

#[test]
fn every_sim_cards_dma_latency_holds_on_a_busy_host() {
    for card in ["sim", "sim-qdma", "sim-nvram", "sim-xdma-st", "sim-qdma-st"] {
        same_when_busy(
            &["latency", card, "--dma", "--size", "64", "--dma-samples", "2000", "--samples", "10"],
            "/latency/p50_ns",
            false,
        );
    }
}
