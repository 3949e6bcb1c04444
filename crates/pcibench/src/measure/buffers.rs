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
    Measuring::on_host(context).watching(session.and_then(|s| s.health())).run(
        &MONOTONIC,
        "buffers",
        bytes,
        hooks,
        |s| buffers::run(&bufs, &unavailable, &plan, s),
    )
}
