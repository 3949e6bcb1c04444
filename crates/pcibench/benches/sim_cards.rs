//! The host path's cost per transfer on each simulated card, on an idle host and with two busy
//! loops pinned to every CPU (`cargo bench -p pcibench --bench sim_cards`; issue 52).
//!
//! Each card's engine progresses with time at its declared datapath, computed whenever the host
//! looks, so the figures should not depend on the load: a transfer costs the model's time (its
//! descriptor fetch and bytes on the datapath) or the host path's (submitting, polling, the copy
//! the model makes in the host's thread when it looks), whichever is longer. 64-byte transfers
//! take the model a few tens of nanoseconds: their time per transfer is the host path's alone.
//! 64 KiB and 1 MiB transfers show which of the two bounds a card. Each figure is the median of
//! a `dma` row (the library's `measure`, as `pcibench dma CARD --size N` runs it), in
//! nanoseconds per transfer.

use pcibench::host::Host;
use pcibench::measure::{DefaultSize, DmaDirs, DmaPattern, DmaRequest, EngineRequest, Hooks, Measured, Request};
use pcibench::sim::SimId;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const SIZES: [u64; 3] = [64, 64 << 10, 1 << 20];

/// Two busy loops pinned to each CPU this process may use, until dropped.
struct Hogs(Arc<AtomicBool>, Vec<std::thread::JoinHandle<()>>);

impl Hogs {
    fn start() -> Hogs {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = pcibench::os::cpu::process_cpus()
            .into_iter()
            .flat_map(|c| [c, c])
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
        Hogs(stop, threads)
    }
}

impl Drop for Hogs {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
        self.1.drain(..).for_each(|t| {
            let _ = t.join();
        });
    }
}

/// Median ns per transfer of `card`'s rows, h2c then c2h, per size.
fn per_transfer(host: &Host, card: SimId) -> Vec<(String, f64)> {
    let request = Request::Dma(DmaRequest {
        device: pcibench::device::Target::Sim(card),
        via: None,
        engine: EngineRequest::default(),
        dirs: DmaDirs::Both,
        queues: Vec::new(),
        pattern: DmaPattern::Seq,
        window: None,
        sizes: SIZES.to_vec(),
        default_size: DefaultSize::Window,
        total: Some(32 << 20),
        row_budget_ms: Some(300),
        timeout_ms: 2000,
        allow_dma: false,
        completion: None,
        irq_kind: None,
        rate: None,
        soak: None,
        common: Default::default(),
    });
    let stop = AtomicBool::new(false);
    let mut hooks = Hooks { stop: &stop, progress: &mut (), trace: None };
    let m = pcibench::measure::measure(host, &request, &mut hooks).expect("measure");
    let Measured::Report(r) = m.measured else { panic!("a report") };
    r.results
        .iter()
        .filter_map(|x| {
            let s = x.stats.as_ref()?;
            Some((format!("{} {}", x.dir, pcibench::units::human_size(x.size)), x.size as f64 / s.median_mbps * 1e3))
        })
        .collect()
}

fn main() {
    let host = Host::from_env();
    println!("host path per transfer on the simulated cards (median ns per transfer; 64 B: the host path alone)");
    println!("{:<12} {:<12} {:>12} {:>16} {:>8}", "card", "row", "idle ns", "2 hogs/CPU ns", "ratio");
    for card in SimId::all() {
        let idle = per_transfer(&host, card);
        let busy = {
            let _hogs = Hogs::start();
            per_transfer(&host, card)
        };
        for ((row, a), (_, b)) in idle.iter().zip(&busy) {
            println!("{:<12} {:<12} {:>12.0} {:>16.0} {:>8.2}", card.name(), row, a, b, b / a);
        }
    }
}
