//! `buffers`' plan: which kinds of buffer (those named must open; of those found on this host,
//! the ones it cannot give become skipped lines), the access size and total.

use super::{BuffersRequest, Hooks, Measuring};
use crate::bench::buffers::{self, BufferPlan};
use crate::bench::context;
use crate::bench::result::Report;
use crate::bench::sample::clock::MONOTONIC;
use crate::dma::cpu::{self, CpuBuffer, Kind};
use crate::host::Host;
use crate::session::Session;
use crate::Result;

/// Bytes per access when the request names none, for buffers whose size pcibench chooses.
const DEFAULT_SIZE: u64 = 16 << 20;

/// Measure CPU access to the buffers `r` names, or every kind this host has (and `session`'s
/// device's DMA buffers, when there is one).
pub fn measure(host: &Host, session: Option<&Session>, r: &BuffersRequest, hooks: &mut Hooks) -> Result<Report> {
    let size = r.size;
    // Kinds named with --buffer must open; of the discovered ones, those this host cannot give
    // are reported as skipped.
    let named = !r.kinds.is_empty();
    let kinds = if named {
        r.kinds.clone()
    } else {
        let mut k = cpu::discover(host);
        if session.is_some() {
            k.push(Kind::Device);
        }
        k
    };
    let mut bufs: Vec<Box<dyn CpuBuffer>> = Vec::new();
    let mut unavailable = Vec::new();
    for k in &kinds {
        let opened = match (k, session) {
            (Kind::Device, Some(s)) => s.cpu_buffer(size.unwrap_or(DEFAULT_SIZE)),
            _ => cpu::open(host, k, size),
        };
        match opened {
            Ok(b) => bufs.push(b),
            Err(e) if !named => unavailable.push((k.label(), e.to_string())),
            Err(e) => return Err(e),
        }
    }
    let placement = r.common.placement();
    let context = match session {
        Some(s) => s.place(placement, &r.common.command_line)?,
        None => context::place(host, placement, None, &r.common.command_line)?,
    };
    let largest = bufs.iter().map(|b| size.unwrap_or(b.len() as u64)).max().unwrap_or(DEFAULT_SIZE);
    let plan = BufferPlan {
        widths: r.widths.clone(),
        size,
        total: r.total.unwrap_or(16 * largest),
        budget_ns: r.total.is_none().then_some(crate::bench::sample::sampler::ROW_BUDGET_NS),
    };
    let bytes = plan.total.saturating_mul(2 * bufs.len() as u64);
    // A total given: the whole run (every buffer, access and sync) is estimated first.
    let probe = plan.budget_ns.is_none();
    Measuring::on_host(context).watching(session.and_then(|s| s.health())).run_summed(
        &MONOTONIC,
        "buffers",
        bytes,
        hooks,
        probe,
        |s| buffers::run(&bufs, &unavailable, &plan, s),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::Via;
    use crate::measure::{BuffersRequest, Common};
    use crate::mmio::Width;
    use std::sync::atomic::AtomicBool;

    /// Issue 43: a real u-dma-buf is host memory reached by the CPU, no device's access path: the
    /// report says `"via": "host"` (not a simulated card's `sim`) beside `"simulated": false`, and
    /// the buffer names its kind and its file. A saved run from before `host` (`"via": "sim"`)
    /// still reads.
    #[test]
    fn a_u_dma_buf_is_host_memory_of_its_own_kind_and_file() {
        let (_t, host) = crate::dma::cpu::udev::testing::fixture(true);
        let r = BuffersRequest {
            device: None,
            kinds: vec![Kind::UDmaBuf("udmabuf0".into()), Kind::Heap],
            size: Some(4096),
            total: Some(16 << 10),
            widths: vec![Width::B64],
            common: Common::default(),
        };
        let stop = AtomicBool::new(false);
        let mut progress = ();
        let mut hooks = Hooks { stop: &stop, progress: &mut progress, trace: None };
        let report = measure(&host, None, &r, &mut hooks).unwrap();
        assert_eq!((report.device.as_str(), report.via, report.simulated), ("host", Via::Host, false));
        let kinds: Vec<_> = report.buffers.iter().map(|b| (b.kind.as_deref(), b.path.clone())).collect();
        let dev = host.path("/dev/udmabuf0").display().to_string();
        assert_eq!(kinds, [(Some("u-dma-buf"), Some(dev)), (Some("heap"), None)]);
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!((&json["via"], &json["simulated"]), (&serde_json::json!("host"), &serde_json::json!(false)));
        assert!(report.results.iter().all(|x| x.verify == Some(crate::bench::result::Verify::Ok)));

        let mut old = json;
        old["via"] = "sim".into();
        let old: Report = serde_json::from_value(old).unwrap();
        assert_eq!((old.via, old.buffers.len()), (Via::Sim, 2));
    }
}
