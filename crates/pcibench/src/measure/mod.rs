//! The one measuring API. A `Request` says what to measure, as plain data; `measure` (or
//! `Session::measure`, on a device already open) resolves what it leaves open against the device
//! and its engine (the default BARs, sizes and totals, the engine and its window: one plan per
//! kind, in `pio`, `dma`, `latency`, `buffers`), places the measuring thread, runs the runner
//! through the one sampling loop, and returns the report with its context. `run` is a list of
//! requests (`suite`). The caller hands in the stop flag and a `Progress` (the CLI's progress
//! bar): the library still never prints.

pub mod buffers;
pub mod completion;
pub mod dma;
pub mod latency;
pub mod memtest;
pub mod pio;
pub mod request;
pub mod soak;
pub mod suite;

pub use self::request::*;
pub use self::suite::SuiteReport;

use crate::bench::context::{Context, Placement};
use crate::bench::result::Report;
use crate::bench::sample::clock::Clock;
use crate::bench::sample::estimate::{Probe, Said};
use crate::bench::sample::sampler::{Progress, Sampling};
use crate::host::Host;
use crate::pci::health::{HealthProbe, Snapshot};
use crate::pci::DeviceInfo;
use crate::session::Session;
use crate::trace::Tracer;
use crate::Result;
use std::sync::atomic::AtomicBool;

/// What the caller lends a measurement: the flag that stops it early (SIGINT: the rows measured
/// so far are kept, engines stopped), where its progress goes, and where `measure` traces the
/// device it opens (`--trace`; a session the caller opened is traced with `Session::traced`).
pub struct Hooks<'a> {
    pub stop: &'a AtomicBool,
    pub progress: &'a mut dyn Progress,
    pub trace: Option<&'a Tracer>,
}

/// What a request measured.
// One value per measurement, handed from the library to the exporter, never stored in bulk: the
// size of the suite's variant costs nothing worth a box.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum Measured {
    Report(Report),
    Suite(SuiteReport),
}

/// A finished measurement: the request, the device it measured (None: host memory only), and
/// what it measured.
#[derive(Debug, Clone)]
pub struct Measurement {
    pub request: Request,
    pub device: Option<DeviceInfo>,
    pub measured: Measured,
}

/// Measure `request`: open its device (if it names one) on its access path, and measure.
pub fn measure(host: &Host, request: &Request, hooks: &mut Hooks) -> Result<Measurement> {
    let session = request
        .device()
        .map(|t| Session::open(host, t, request.via()).map(|s| s.traced(hooks.trace.cloned())))
        .transpose()?;
    let measured = match (&session, request) {
        (Some(s), _) => s.measure(request, hooks)?,
        (None, Request::Buffers(r)) => Measured::Report(buffers::measure(host, None, r, hooks)?),
        // Only buffers may name no device (every other request's device is not optional).
        (None, _) => return Err(crate::Error::usage("name the device to measure")),
    };
    Ok(Measurement { request: request.clone(), device: session.map(|s| s.device.info), measured })
}

impl Session {
    /// Measure `request` on this session's device (its `device` and `via` are the session's).
    /// On a traced session each request is a line of the trace, and its report says it was traced.
    pub fn measure(&self, request: &Request, hooks: &mut Hooks) -> Result<Measured> {
        if let Some(t) = self.tracer() {
            t.measure(request.command(), &serde_json::to_value(request).unwrap_or_default());
        }
        let mut measured = match request {
            Request::Pio(r) => Measured::Report(pio::measure(self, r, hooks)?),
            Request::Dma(r) => Measured::Report(dma::measure(self, r, hooks)?),
            Request::Latency(r) => Measured::Report(latency::measure(self, r, hooks)?),
            Request::Buffers(r) => Measured::Report(buffers::measure(&self.host, Some(self), r, hooks)?),
            Request::Run(r) => Measured::Suite(suite::measure(self, r, hooks)?),
            Request::Memtest(r) => Measured::Report(memtest::measure(self, r, hooks)?),
        };
        if let (Some(t), Measured::Report(r)) = (self.tracer(), &mut measured) {
            r.warnings.push(format!(
                "traced to {}: each register access and descriptor was written there as it happened, and the figures include that cost",
                t.path().display()
            ));
        }
        if let Some(t) = self.tracer() {
            // What that cost each row, measured now that the rows are done (issue 43). A
            // directory that takes no second file leaves the rows without the figure, not the run.
            if let Ok(ns) = crate::bench::trace_cost::per_event_ns(t.path(), &crate::bench::sample::clock::MONOTONIC) {
                let reports = match &mut measured {
                    Measured::Report(r) => vec![r],
                    Measured::Suite(s) => s.pio.iter_mut().chain(s.dma.iter_mut()).collect(),
                };
                for r in reports {
                    crate::bench::trace_cost::annotate(r, ns);
                }
            }
        }
        Ok(measured)
    }
}

impl Common {
    /// Where the measuring thread runs (`--cpu`).
    pub fn placement(&self) -> Placement {
        self.cpu.map_or(Placement::Default, Placement::Cpu)
    }
}

/// What every runner is wrapped in the same way: where the thread runs, the link that bounds the
/// figures (or why none does), the link-health watch from start to end.
pub(crate) struct Measuring {
    pub context: Context,
    limit_note: Option<String>,
    health: Option<HealthProbe>,
    /// The link's health when the measurement began, for the whole run's changes.
    health_start: Option<Snapshot>,
    /// Where the session's DMA buffers went against the device's node (`dma::buffers::numa`).
    numa: Option<std::sync::Arc<crate::dma::buffers::numa::NodePolicy>>,
}

impl Measuring {
    /// Place the measuring thread on `session`'s device and start watching its link. Everything
    /// privileged is open by now: the capabilities go before any measuring thread starts.
    pub fn start(session: &Session, common: &Common) -> Result<Measuring> {
        // The request passed every check against the device: a deferred trace gets its file now.
        if let Some(t) = session.tracer() {
            t.commit()?;
        }
        session.drop_privilege()?;
        let context = session.place(common.placement(), &common.command_line)?;
        let health = session.health();
        let health_start = health.as_ref().map(|h| h.snapshot());
        let limit_note = session.device.link.as_ref().err().cloned();
        Ok(Measuring { context, limit_note, health, health_start, numa: session.buffer_node() })
    }

    /// Where a measurement of host memory alone ran: no device, no link.
    pub fn on_host(context: Context) -> Measuring {
        Measuring { context, limit_note: None, health: None, health_start: None, numa: None }
    }

    /// Watch `health` (a device's link and whether it still answers) while measuring host
    /// memory: `buffers` of a device's DMA buffers stops with the card-gone line when it goes.
    pub fn watching(mut self, health: Option<HealthProbe>) -> Measuring {
        self.health_start = health.as_ref().map(|h| h.snapshot());
        self.health = health;
        self
    }

    /// Run `runner` with the sampling loop on `clock`, its progress as `what` over `bytes`, then
    /// attach the context (with what changed in the link's health since the start) and the
    /// limit note to its report.
    pub fn run(
        &self,
        clock: &dyn Clock,
        what: &str,
        bytes: u64,
        hooks: &mut Hooks,
        runner: impl FnOnce(&mut Sampling) -> Result<Report>,
    ) -> Result<Report> {
        self.run_on(clock, what, bytes, hooks.stop, &mut *hooks.progress, runner)
    }

    /// `run`, and with `probe` (a run of several configurations, each moving a total the user
    /// gave) the whole run's time is said first: a probe pass takes each configuration to the end
    /// of its calibration (`bench::sample::estimate`) and their times are summed, so `--size
    /// 1,64M` is estimated by what each size costs. The run then says no configuration's again.
    pub fn run_summed(
        &self,
        clock: &dyn Clock,
        what: &str,
        bytes: u64,
        hooks: &mut Hooks,
        probe: bool,
        mut runner: impl FnMut(&mut Sampling) -> Result<Report>,
    ) -> Result<Report> {
        if !probe || !hooks.progress.estimates() {
            return self.run_on(clock, what, bytes, hooks.stop, &mut *hooks.progress, runner);
        }
        let mut p = Probe::default();
        let mut probing = Sampling::new(clock, hooks.stop, &mut p, self.health.as_ref());
        runner(&mut probing)?;
        // A change in the link's health while a configuration was probed is its row's too.
        let probed = std::mem::take(&mut probing.probed);
        if let Some((secs, work)) = p.total().filter(|_| !hooks.stop.load(std::sync::atomic::Ordering::Relaxed)) {
            hooks.progress.estimate(secs, &work, "--total");
        }
        self.run_on(clock, what, bytes, hooks.stop, &mut Said(&mut *hooks.progress), |s| {
            s.probed = probed;
            runner(s)
        })
    }

    fn run_on(
        &self,
        clock: &dyn Clock,
        what: &str,
        bytes: u64,
        stop: &AtomicBool,
        progress: &mut dyn Progress,
        runner: impl FnOnce(&mut Sampling) -> Result<Report>,
    ) -> Result<Report> {
        progress.begin(what, bytes);
        let mut sampling = Sampling::new(clock, stop, &mut *progress, self.health.as_ref());
        let mut report = runner(&mut sampling)?;
        progress.end();
        let mut context = self.context.clone();
        if let (Some(h), Some(start)) = (&self.health, &self.health_start) {
            context.link_health = Some(crate::pci::health::changes(start, &h.snapshot()));
        }
        context.dma_buffers = self.numa.as_ref().and_then(|n| n.placement());
        context.warnings.extend(context.dma_buffers.as_ref().and_then(|b| b.warning()));
        report.context = Some(context);
        // A runner's own note (a simulated card's model bounding its DMA rows) stands.
        if report.limit_note.is_none() {
            report.limit_note = self.limit_note.clone();
        }
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::IoMode;
    use crate::direction::Direction;
    use crate::mmio::Width;

    /// What the CLI does for `pcibench pio sim --bar 2 --map uc --size 4K --total 64K --save F`:
    /// one call measures, and the saved run carries the request.
    #[test]
    fn measure_opens_the_device_and_the_saved_run_keeps_the_request() {
        let host = Host::with_root("/nonexistent-root");
        let request = Request::Pio(PioRequest {
            device: "sim".parse().unwrap(),
            via: None,
            bars: Some(vec![2]),
            maps: vec![MapMode::Uc],
            dirs: vec![Direction::H2c, Direction::C2h],
            widths: Widths::These(vec![Width::B64]),
            sizes: vec![4096],
            total: 64 << 10,
            total_by_time: false,
            row_budget_ms: None,
            offset: 0,
            io: IoMode::Mmap,
            allow_write: false,
            common: Common::default(),
        });
        let stop = AtomicBool::new(false);
        let mut moved = 0u64;
        let mut progress = |n: u64| moved += n;
        let m = measure(&host, &request, &mut Hooks { stop: &stop, progress: &mut progress, trace: None }).unwrap();
        let Measured::Report(r) = &m.measured else { panic!("a report") };
        assert_eq!(r.results.len(), 2, "a simulated card is written without consent");
        assert!(r.results.iter().all(|x| x.verify == Some(crate::bench::result::Verify::Ok)));
        assert!(r.context.is_some() && r.limit_note.as_deref().is_some_and(|n| n.contains("simulated card")));
        assert!(moved > 0, "progress reached the caller");
        assert_eq!(m.device.as_ref().map(|d| d.address.as_str()), Some("sim"));
        let saved = crate::results::saved::SavedRun::of_measurement(&host, &m);
        assert_eq!(saved.request, Some(request));
        assert_eq!(saved.command, "pio");
    }

    fn read_request(device: &str, maps: Vec<MapMode>, w: Width) -> Request {
        Request::Pio(PioRequest {
            device: device.parse().unwrap(),
            via: None,
            bars: Some(vec![2]),
            maps,
            dirs: vec![Direction::C2h],
            widths: Widths::These(vec![w]),
            sizes: vec![4096],
            total: 16 << 10,
            total_by_time: false,
            row_budget_ms: None,
            offset: 0,
            io: IoMode::Mmap,
            allow_write: false,
            common: Common::default(),
        })
    }

    /// Issue #26: the loads a read uses follow the memory type of the mapping it runs on, fixed
    /// when the mapping is made and carried in the row: a BAR reached through sysfs
    /// `resource2_wc` is write-combining (streaming loads on x86-64), `resource2` uncached
    /// (plain loads), and the sim card's BARs write-back host memory whatever `--map` says
    /// (plain loads).
    #[test]
    fn the_read_routine_follows_the_mappings_memory_type() {
        use crate::mmio::{self, MemType};
        let t = tempfile::tempdir().unwrap();
        crate::pci::fixture::seed_tree(t.path());
        let dev = t.path().join("sys/bus/pci/devices/0000:15:00.0");
        for f in ["resource2", "resource2_wc"] {
            std::fs::write(dev.join(f), vec![0x5au8; 128 << 10]).unwrap();
        }
        let host = Host::with_root(t.path());
        let w = [Width::V512, Width::V256, Width::V128, Width::B64]
            .into_iter()
            .find(|w| mmio::available(*w).is_ok())
            .unwrap();
        let rows = |device: &str| {
            let stop = AtomicBool::new(false);
            let mut progress = |_: u64| {};
            let request = read_request(device, vec![MapMode::Uc, MapMode::Wc], w);
            let m = measure(&host, &request, &mut Hooks { stop: &stop, progress: &mut progress, trace: None }).unwrap();
            let Measured::Report(r) = m.measured else { panic!("a report") };
            r.results.iter().map(|x| (x.map.unwrap(), x.mem, x.stats.is_some())).collect::<Vec<_>>()
        };
        assert_eq!(
            rows("15:00.0"),
            [(MapMode::Uc, Some(MemType::Uc), true), (MapMode::Wc, Some(MemType::Wc), true)],
            "sysfs resource2 and resource2_wc"
        );
        assert_eq!(
            rows("sim"),
            [(MapMode::Uc, Some(MemType::Wb), true), (MapMode::Wc, Some(MemType::Wb), true)],
            "the sim card's BARs are host memory"
        );
        let vector = !w.is_scalar();
        assert_eq!(mmio::streaming_loads(w, MemType::Wc), vector && cfg!(target_arch = "x86_64"));
        assert!(!mmio::streaming_loads(w, MemType::Wb) && !mmio::streaming_loads(w, MemType::Uc));
        assert_eq!(MemType::Wb.vector_loads(), "plain loads");
    }
}
