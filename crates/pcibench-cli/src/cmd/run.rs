use super::dma::DmaArgs;
use super::pio::{DirArg, Format};
use super::{parse_target, progress_bar};
use clap::Args;
use pcibench::access::IoMode;
use pcibench::bench::pio::{self, MapMode, PioPlan, Verdict};
use pcibench::dma::engines;
use pcibench::dma::Direction;
use pcibench::host::Host;
use pcibench::mmio::{self, Width};
use pcibench::report::info::info_text;
use pcibench::report::pio as pio_out;
use pcibench::session::Session;
use pcibench::target::{self, Target};
use pcibench::units::parse_size;
use std::process::ExitCode;

#[derive(Args)]
pub struct RunArgs {
    /// The device (default: the simulated card `sim`).
    #[arg(value_parser = parse_target, default_value = "sim")]
    device: Target,
    /// Allow PIO writes (host-to-card) on a real device; without it PIO only reads.
    #[arg(long)]
    allow_write: bool,
    /// Allow the DMA suite on a real device with a known engine (edu, xdma).
    #[arg(long)]
    allow_dma: bool,
    /// Bytes per PIO/DMA configuration (default: 64M on sim, 4M on a real device).
    #[arg(long)]
    total: Option<String>,
}

/// The widest plain SIMD routine this CPU has, for the suite's PIO rows.
fn widest() -> Width {
    [Width::V512, Width::V256, Width::V128].into_iter().find(|w| mmio::available(*w).is_ok()).unwrap_or(Width::B64)
}

pub fn run(host: &Host, a: RunArgs) -> anyhow::Result<ExitCode> {
    let session = Session::open(host, &a.device, None)?;
    let info = &session.info;
    println!("== info");
    print!("{}", info_text(info));
    for w in &info.warnings {
        eprintln!("warning: {w}");
    }
    let total = match &a.total {
        Some(t) => parse_size(t)?,
        None if info.simulated => 64 << 20,
        None => 4 << 20,
    };
    let mut failed = false;

    println!("\n== PIO");
    let dev = &session.dev;
    let allow_write = session.may_write(a.allow_write);
    let plan = PioPlan {
        bars: session.pio_bars(&[])?,
        maps: MapMode::ALL.to_vec(),
        dirs: if allow_write { vec![Direction::H2c, Direction::C2h] } else { vec![Direction::C2h] },
        widths: vec![Width::B64, widest(), Width::Memcpy],
        sizes: Vec::new(),
        total,
        offset: 0,
        io: IoMode::Mmap,
        allow_write,
        strict_map: false,
        strict_width: false,
    };
    if !allow_write {
        println!("(reads only: add --allow-write to measure and verify host-to-card writes)");
    }
    let link = info.link.as_ref().and_then(|l| l.model_link());
    let mut bar = progress_bar(plan.planned_bytes(), "pio");
    let report = pio::run(dev.as_ref(), &info.address, info.simulated, link, &plan, &mut |n| bar.inc(n))?;
    bar.finish_and_clear();
    print!("{}", pio_out::table(&report));
    failed |= report.results.iter().any(|r| matches!(r.verify, Some(Verdict::Mismatch { .. })));
    let found: Vec<_> = engines::detect(info, dev.as_ref()).into_iter().flatten().collect();
    drop(session);

    println!("\n== DMA");
    let info = target::describe(host, &a.device)?;
    match found.first() {
        None => println!("no DMA engine pcibench knows on {} ({}): skipped", info.address, info.ids()),
        Some(_) if !a.allow_dma && !info.simulated => {
            println!("skipped: add --allow-dma to let the card's engine read and write host memory")
        }
        Some(engine) => {
            let args = DmaArgs {
                device: a.device,
                engine: Some(engine.engine.to_string()),
                via: None,
                buffer: None,
                dir: DirArg::Both,
                sizes: Vec::new(),
                total: a.total.clone().or_else(|| info.simulated.then(|| "64M".to_string())),
                card_addr: None,
                card_size: None,
                channel: None,
                dma_bits: None,
                timeout_ms: 2000,
                allow_dma: a.allow_dma,
                format: Format::Table,
                json: false,
            };
            let (_, report) = super::dma::measure(host, &args)?;
            super::dma::print(&report, Format::Table)?;
            failed |= report.results.iter().any(|r| r.verified == Some(false));
        }
    }
    if failed {
        eprintln!("pcibench: data did not verify: see the MISMATCH rows");
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}
