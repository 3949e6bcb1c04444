use super::emit_failed;
use super::health::parse_output;
use clap::{Args, ValueEnum};
use pcibench::file::Output;
use pcibench::report::openmetrics;
use pcibench::results::stream;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Clone, Copy, ValueEnum, PartialEq)]
pub enum ExportFormat {
    /// The Prometheus text exposition format (also `prometheus`).
    #[value(alias = "prometheus")]
    Openmetrics,
}

#[derive(Args)]
#[command(after_help = "Per configuration: pcibench_throughput_bytes_per_second (stat=median, p5, p95),
pcibench_transfer_latency_seconds (stat=p50 .. p999), a latency run's pcibench_latency_seconds summary
(quantile=0.5 .. 0.9999), pcibench_verified; labels command, device, config (the row's configuration in
words, as plot and compare name it), kind, dir, size_bytes. pcibench_run_info names the host, time, version.

Examples:
  pcibench dma sim --save dma.json && pcibench export dma.json --format openmetrics
  pcibench export run.json -o /var/lib/node_exporter/textfile_collector/pcibench_run.prom")]
pub struct ExportArgs {
    /// A saved run (written by --save FILE.json).
    #[arg(value_name = "FILE.json")]
    file: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value = "openmetrics")]
    format: ExportFormat,
    /// Write to FILE instead of stdout, replacing it atomically (as health -o does); - is stdout.
    #[arg(short = 'o', long = "output", value_name = "FILE", value_parser = parse_output("run.prom"))]
    output: Option<Output>,
}

pub fn run(a: ExportArgs) -> anyhow::Result<ExitCode> {
    // The rows are read one at a time and kept as what the format needs of them, and the text is
    // written as it is made (docs/hostile-input.md: 10^6 rows took 3.4 GB held whole).
    let mut rows = openmetrics::RunRows::default();
    let run = stream::read(&a.file, &mut rows)?;
    let ExportFormat::Openmetrics = a.format;
    let write = |out: &mut dyn std::io::Write| openmetrics::write_saved_run(&run, &rows.rows, out);
    match &a.output {
        Some(Output::File(dest)) => dest.write_with(|f| write(f))?,
        Some(Output::Stdout) | None => {
            let mut out = std::io::stdout().lock();
            if let Err(e) = write(&mut out) {
                emit_failed(e);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
