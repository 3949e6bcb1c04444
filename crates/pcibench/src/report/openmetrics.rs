//! `--format openmetrics`: the Prometheus text exposition format (version 0.0.4, what
//! node_exporter's textfile collector and Prometheus read; https://prometheus.io/docs/instrumenting/exposition_formats/).
//! Every family has its HELP and TYPE lines and its samples together; names follow Prometheus'
//! rules (`pcibench_` prefix, base units in the name: `_seconds`, `_bytes_per_second`, `_gts`
//! for GT/s; counters end in `_total`); label values are escaped (`\\`, `\"`, `\n`).
//! `health` renders a link-health check, `saved_run` a measuring command's `--save` file.

use crate::bench::result::{Report, Row};
use crate::health::{HealthReport, Status};
use crate::results::config::Config;
use crate::results::saved::SavedRun;
use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::io::Write as _;

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Gauge,
    Counter,
    Summary,
}

struct Family {
    name: &'static str,
    kind: Kind,
    help: &'static str,
    /// (name suffix, labels as written between the braces, value): the suffix is `_sum`/`_count`
    /// for a summary's. Labels are written when added: a run of 10^5 rows keeps one string per
    /// sample, not a vector of string pairs.
    samples: Vec<(&'static str, String, f64)>,
}

/// Families in the order they were first named; a family with no samples is left out.
#[derive(Default)]
struct Exposition {
    families: Vec<Family>,
}

type Labels = Vec<(String, String)>;

impl Exposition {
    fn add(&mut self, name: &'static str, kind: Kind, help: &'static str, labels: Labels, value: f64) {
        self.add_suffixed(name, kind, help, "", labels, value);
    }

    fn add_suffixed(
        &mut self,
        name: &'static str,
        kind: Kind,
        help: &'static str,
        suffix: &'static str,
        labels: Labels,
        value: f64,
    ) {
        let i = match self.families.iter().position(|f| f.name == name) {
            Some(i) => i,
            None => {
                self.families.push(Family { name, kind, help, samples: Vec::new() });
                self.families.len() - 1
            }
        };
        let mut text = String::new();
        for (i, (k, v)) in labels.iter().enumerate() {
            text.push(if i == 0 { '{' } else { ',' });
            text.push_str(k);
            text.push_str("=\"");
            push_escaped(&mut text, v);
            text.push('"');
        }
        if !labels.is_empty() {
            text.push('}');
        }
        self.families[i].samples.push((suffix, text, value));
    }

    fn render(&self) -> String {
        let mut out = String::new();
        for f in self.families.iter().filter(|f| !f.samples.is_empty()) {
            let kind = match f.kind {
                Kind::Gauge => "gauge",
                Kind::Counter => "counter",
                Kind::Summary => "summary",
            };
            let _ = writeln!(out, "# HELP {} {}", f.name, escape_help(f.help));
            let _ = writeln!(out, "# TYPE {} {kind}", f.name);
            for (suffix, labels, value) in &f.samples {
                out.push_str(f.name);
                out.push_str(suffix);
                out.push_str(labels);
                out.push(' ');
                out.push_str(&number(*value));
                out.push('\n');
            }
        }
        out
    }
}

/// A label value as the text format writes it: backslash, double quote and line feed escaped.
pub fn escape_label(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    push_escaped(&mut s, v);
    s
}

fn push_escaped(out: &mut String, v: &str) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

/// Integers without a fraction, others in Rust's shortest round-trip form; NaN and infinities as
/// the format spells them.
fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

fn l(pairs: &[(&str, &str)]) -> Labels {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// A `pcibench health` check.
pub fn health(r: &HealthReport) -> String {
    use Kind::*;
    let mut e = Exposition::default();
    let status = match r.status {
        Status::Healthy => 0.0,
        Status::Warning => 1.0,
        Status::Failure => 2.0,
    };
    e.add(
        "pcibench_health_status",
        Gauge,
        "The verdict of the check: 0 healthy, 1 warnings, 2 failures (the exit status of pcibench health).",
        vec![],
        status,
    );
    e.add(
        "pcibench_health_timestamp_seconds",
        Gauge,
        "When the check ran, seconds since the epoch.",
        vec![],
        r.timestamp as f64,
    );
    e.add("pcibench_health_functions", Gauge, "PCI functions checked.", vec![], r.functions.len() as f64);
    if let Some(changes) = &r.changes {
        for (level, name) in [(crate::health::Level::Warning, "warning"), (crate::health::Level::Failure, "failure")] {
            let n = changes.iter().filter(|c| c.level == level).count();
            e.add(
                "pcibench_health_changes",
                Gauge,
                "What changed since the previous run (--state), by level: errors that grew, retrains, links down.",
                l(&[("level", name)]),
                n as f64,
            );
        }
    }
    for f in &r.functions {
        let id = l(&[("device", &f.address), ("vendor", &f.vendor_id), ("device_id", &f.device_id)]);
        let with = |extra: &[(&str, &str)]| {
            let mut v = id.clone();
            v.extend(l(extra));
            v
        };
        let mut info = id.clone();
        info.extend(l(&[("class", &f.class_code), ("name", &f.name)]));
        info.push(("driver".into(), f.driver.clone().unwrap_or_default()));
        info.push(("port_type".into(), f.port_type.clone().unwrap_or_default()));
        e.add(
            "pcibench_device_info",
            Gauge,
            "A PCI function pcibench health checked (value 1), with its class, name, driver and port type.",
            info,
            1.0,
        );
        if let Some(k) = &f.link {
            let gts = crate::health::LinkHealth::speed_gts;
            let pairs = [
                ("pcibench_link_speed_gts", "The link's current speed in GT/s.", gts(k.current_gen)),
                ("pcibench_link_width", "The link's current width in lanes.", k.current_width.map(f64::from)),
                (
                    "pcibench_link_max_speed_gts",
                    "The fastest speed this function supports (Link Capabilities), GT/s.",
                    gts(k.max_gen),
                ),
                (
                    "pcibench_link_max_width",
                    "The widest width this function supports (Link Capabilities), lanes.",
                    k.max_width.map(f64::from),
                ),
                (
                    "pcibench_link_limit_speed_gts",
                    "The fastest speed both ends of the link support, GT/s.",
                    gts(k.limit_gen),
                ),
                (
                    "pcibench_link_limit_width",
                    "The widest width both ends of the link support, lanes.",
                    k.limit_width.map(f64::from),
                ),
            ];
            for (name, help, v) in pairs {
                if let Some(v) = v {
                    e.add(name, Gauge, help, id.clone(), v);
                }
            }
            e.add(
                "pcibench_link_degraded",
                Gauge,
                "1 when the link trained below what both ends support (lspci's downgraded).",
                id.clone(),
                f64::from(u8::from(k.degraded)),
            );
            if let Some(up) = k.up {
                e.add(
                    "pcibench_link_up",
                    Gauge,
                    "1 when the link is up, 0 when it is down while a function is at its other end.",
                    id.clone(),
                    f64::from(u8::from(up)),
                );
            }
        }
        for c in f.aer.iter().flatten() {
            if c.is_rootport() {
                let sev = c.severity.trim_start_matches("rootport_");
                e.add(
                    "pcibench_aer_rootport_errors_total",
                    Counter,
                    "AER errors a root port's hierarchy reported to it, by severity (aer_rootport_total_err_*).",
                    with(&[("severity", sev)]),
                    c.count as f64,
                );
            } else if !c.is_total() {
                e.add(
                    "pcibench_aer_errors_total",
                    Counter,
                    "AER errors this function logged, by severity and kind as the kernel names them (aer_dev_*).",
                    with(&[("severity", &c.severity), ("kind", &c.kind)]),
                    c.count as f64,
                );
            }
        }
        if let Some(set) = &f.device_status {
            for (_, bit, _, _) in crate::pci::health::DEVSTA_BITS {
                e.add("pcibench_device_status_error", Gauge, "1 when a Device Status error bit is set (CorrErr, NonFatalErr, FatalErr, UnsupReq); absent where config space is not readable.", with(&[("bit", bit)]), f64::from(u8::from(set.contains(&bit))));
            }
        }
        if let Some(set) = &f.link_status {
            for (_, bit) in crate::pci::health::LNKSTA_BITS {
                e.add("pcibench_link_bandwidth_changed", Gauge, "1 when Link Status BWMgmt (LBMS: the link retrained or changed bandwidth) or ABWMgmt (LABS: on its own) is set; absent where config space is not readable.", with(&[("bit", bit)]), f64::from(u8::from(set.contains(&bit))));
            }
        }
        if let Some(c) = &f.command {
            for (bit, on) in [("Mem", c.memory), ("BusMaster", c.bus_master), ("DisINTx", c.intx_disable)] {
                e.add("pcibench_command", Gauge, "1 when a Command register bit is set (Mem: Memory Space, BusMaster, DisINTx: Interrupt Disable), as lspci names them; absent where config space is not readable.", with(&[("bit", bit)]), f64::from(u8::from(on)));
            }
        }
    }
    e.render()
}

/// What `saved_run` takes of a row: its configuration and figures. `export` keeps its rows as
/// these while it reads the file (`results::stream`), never whole.
pub struct RunRow {
    pub config: Config,
    /// Throughput median, p5, p95 (MB/s) and per-transfer p50, p90, p99, p999 (µs).
    stats: Option<[f64; 7]>,
    /// Single-access p50, p90, p99, p99.9, p99.99 (ns), mean (ns) and samples.
    latency: Option<([f64; 5], f64, u64)>,
    verified: Option<bool>,
}

impl RunRow {
    /// `row` of `report`.
    pub fn of(report: &Report, row: &Row) -> RunRow {
        let mut r = RunRow::of_row(row);
        r.in_report(report);
        r
    }

    /// `row` before its report is known (`in_report` then says what the report adds).
    pub fn of_row(row: &Row) -> RunRow {
        let stats = row.stats.as_ref().map(|s| {
            let l = &s.latency;
            [s.median_mbps, s.p5_mbps, s.p95_mbps, l.p50_us, l.p90_us, l.p99_us, l.p999_us]
        });
        let latency =
            row.latency.as_ref().map(|l| ([l.p50_ns, l.p90_ns, l.p99_ns, l.p999_ns, l.p9999_ns], l.mean_ns, l.samples));
        RunRow {
            config: Config::of(
                &Report::new(crate::bench::result::Kind::Pio, "", false, crate::access::Via::Sim, 0.0),
                row,
            ),
            stats,
            latency,
            verified: row.verify.as_ref().map(|v| matches!(v, crate::bench::result::Verify::Ok)),
        }
    }

    /// The report-wide part of its configuration (the kind, the engine).
    pub fn in_report(&mut self, report: &Report) {
        let of_report = Config::of(report, &Row::new(self.config.dir, 0));
        (self.config.kind, self.config.engine) = (of_report.kind, of_report.engine);
    }
}

const THROUGHPUT: &str = "pcibench_throughput_bytes_per_second";
const TRANSFER: &str = "pcibench_transfer_latency_seconds";
const LATENCY: &str = "pcibench_latency_seconds";
const VERIFIED: &str = "pcibench_verified";

/// A measuring command's saved run (`--save`): per configuration, throughput median and p5/p95,
/// per-transfer latency percentiles, and a latency run's percentiles as a summary.
pub fn saved_run(run: &SavedRun) -> String {
    let rows: Vec<RunRow> = run.rows().map(|(report, row)| RunRow::of(report, row)).collect();
    let mut out = Vec::new();
    // Writing to memory cannot fail.
    let _ = write_saved_run(run, &rows, &mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// A saved run's rows as `write_saved_run` takes them, kept while `results::stream` reads the
/// file (each row's report-wide part filled in once its report is whole).
#[derive(Default)]
pub struct RunRows {
    pub rows: Vec<RunRow>,
    /// Where the current report's rows begin.
    start: usize,
}

impl crate::results::stream::Rows for RunRows {
    fn row(&mut self, _report: usize, _index: usize, row: Row) {
        self.rows.push(RunRow::of_row(&row));
    }
    fn report(&mut self, _index: usize, report: &Report) {
        for r in &mut self.rows[self.start..] {
            r.in_report(report);
        }
        self.start = self.rows.len();
    }
}

/// `saved_run` of `run` (its head: device, context) and its `rows`, written to `out` as it goes:
/// each family's samples in turn, one pass over the rows a family, so nothing but the rows' labels
/// is held beside them.
pub fn write_saved_run(run: &SavedRun, rows: &[RunRow], out: &mut dyn std::io::Write) -> std::io::Result<()> {
    use Kind::*;
    let mut e = Exposition::default();
    let device = run.device.as_ref().map_or(String::new(), |d| d.address.clone());
    let mut info = l(&[("command", &run.command), ("device", &device)]);
    if let Some(d) = &run.device {
        info.extend(l(&[("vendor", &d.vendor_id), ("device_id", &d.device_id), ("name", &d.name)]));
    }
    let ctx = run.context.as_ref();
    info.push(("host".into(), ctx.and_then(|c| c.hostname.clone()).unwrap_or_default()));
    info.push(("time".into(), ctx.map(|c| c.time.clone()).unwrap_or_default()));
    info.push(("pcibench_version".into(), ctx.map(|c| c.pcibench_version.clone()).unwrap_or_default()));
    info.push(("via".into(), run.path_words()));
    e.add(
        "pcibench_run_info",
        Gauge,
        "A saved measuring run (value 1): the command, device, host, time, pcibench version and access path.",
        info,
        1.0,
    );
    out.write_all(e.render().as_bytes())?;
    let base = format!("command=\"{}\",device=\"{}\"", escape_label(&run.command), escape_label(&device));
    let labels = labels(rows);
    // Families in the order rows first name them.
    let mut order: Vec<&'static str> = Vec::new();
    for r in rows {
        let named = [
            (r.stats.is_some(), THROUGHPUT),
            (r.stats.is_some(), TRANSFER),
            (r.latency.is_some(), LATENCY),
            (r.verified.is_some(), VERIFIED),
        ];
        for (has, family) in named {
            if has && !order.contains(&family) {
                order.push(family);
            }
        }
        if order.len() == 4 {
            break;
        }
    }
    let mut w = std::io::BufWriter::with_capacity(1 << 16, out);
    for family in order {
        let (kind, help) = match family {
            THROUGHPUT => (Gauge, "Throughput of a configuration over its samples (stat: median, p5, p95), bytes per second."),
            // `stat`, not `quantile`: that label belongs to summaries (promtool check metrics), and
            // these percentiles come with no sum or count of their own.
            TRANSFER => (
                Gauge,
                "Time of one transfer in a throughput configuration, by percentile (stat: p50, p90, p99, p999), seconds.",
            ),
            LATENCY => (Summary, "Single-access latency of a configuration, seconds."),
            _ => (Gauge, "1 when the configuration's data verified, 0 when it did not."),
        };
        let kind = match kind {
            Gauge => "gauge",
            Counter => "counter",
            Summary => "summary",
        };
        writeln!(w, "# HELP {family} {}", escape_help(help))?;
        writeln!(w, "# TYPE {family} {kind}")?;
        for (r, label) in rows.iter().zip(&labels) {
            let c = &r.config;
            let id = format!(
                "{base},config=\"{}\",kind=\"{}\",dir=\"{}\",size_bytes=\"{}\"",
                escape_label(label),
                escape_label(c.kind.name()),
                c.dir,
                c.size
            );
            let mut sample = |suffix: &str, extra: Option<(&str, &str)>, v: f64| match extra {
                Some((k, x)) => writeln!(w, "{family}{suffix}{{{id},{k}=\"{x}\"}} {}", number(v)),
                None => writeln!(w, "{family}{suffix}{{{id}}} {}", number(v)),
            };
            match (family, &r.stats, &r.latency) {
                (THROUGHPUT, Some(s), _) => {
                    for (stat, mbps) in [("median", s[0]), ("p5", s[1]), ("p95", s[2])] {
                        sample("", Some(("stat", stat)), mbps * 1e6)?;
                    }
                }
                (TRANSFER, Some(s), _) => {
                    for (stat, us) in [("p50", s[3]), ("p90", s[4]), ("p99", s[5]), ("p999", s[6])] {
                        sample("", Some(("stat", stat)), us / 1e6)?;
                    }
                }
                (LATENCY, _, Some((q, mean, n))) => {
                    for (quantile, ns) in ["0.5", "0.9", "0.99", "0.999", "0.9999"].into_iter().zip(q) {
                        sample("", Some(("quantile", quantile)), ns / 1e9)?;
                    }
                    sample("_sum", None, mean * *n as f64 / 1e9)?;
                    sample("_count", None, *n as f64)?;
                }
                (VERIFIED, _, _) => {
                    if let Some(ok) = r.verified {
                        sample("", None, f64::from(u8::from(ok)))?;
                    }
                }
                _ => {}
            }
        }
    }
    w.flush()
}

/// Each row's configuration in words, a repeat numbered (`label #2`) in order. Labels given so
/// far, and per configuration the next `#k` to try: a run of n rows of one configuration costs n
/// lookups, not n^2/2 (a Vec searched from `#2` up each time made 10^5 rows take minutes; issue 43).
fn labels(rows: &[RunRow]) -> Vec<String> {
    let mut seen: HashSet<String> = HashSet::new();
    let mut next: HashMap<String, usize> = HashMap::new();
    let mut out = Vec::with_capacity(rows.len());
    for r in rows {
        let words = r.config.label();
        let mut label = words.clone();
        if seen.contains(&label) {
            let k = next.entry(words.clone()).or_insert(2);
            loop {
                label = format!("{words} #{k}");
                *k += 1;
                if !seen.contains(&label) {
                    break;
                }
            }
        }
        seen.insert(label.clone());
        out.push(label);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_numbers() {
        assert_eq!(escape_label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
        assert_eq!(number(3.0), "3");
        assert_eq!(number(2.5), "2.5");
        assert_eq!(number(f64::NAN), "NaN");
        assert_eq!(number(f64::INFINITY), "+Inf");
        let mut e = Exposition::default();
        e.add("x_total", Kind::Counter, "help with \\ and\nnewline", l(&[("k", "v\"")]), 1.0);
        e.add("empty", Kind::Gauge, "h", vec![], 0.0);
        e.families[1].samples.clear();
        assert_eq!(
            e.render(),
            "# HELP x_total help with \\\\ and\\nnewline\n# TYPE x_total counter\nx_total{k=\"v\\\"\"} 1\n"
        );
    }
    /// A configuration measured n times is `label`, `label #2` .. `label #n`, in order, also where
    /// a row's own label already reads like a repeat's.
    #[test]
    fn repeated_configurations_are_numbered_in_order() {
        use crate::access::Via;
        use crate::bench::result::{Kind as ReportKind, Report, Row, Verify};
        use crate::direction::Direction;
        let mut r = Report::new(ReportKind::Dma, "sim", true, Via::Sim, 20.0);
        r.engine = Some("sim".into());
        for _ in 0..4 {
            let mut row = Row::new(Direction::H2c, 4096);
            row.verify = Some(Verify::Ok);
            r.results.push(row);
        }
        let mut reports = vec![r.clone()];
        // A second report whose engine name makes its label `dma sim #2 h2c ...`: not a clash.
        r.engine = Some("sim #2".into());
        r.results.truncate(1);
        reports.push(r);
        let run: SavedRun = serde_json::from_value(serde_json::json!({
            "format": crate::results::saved::FORMAT, "version": 1, "command": "dma", "context": null,
            "device": null, "via": "sim", "iommu": null, "link_health": null,
            "reports": serde_json::to_value(&reports).unwrap(),
        }))
        .unwrap();
        let text = saved_run(&run);
        let configs: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("pcibench_verified"))
            .map(|l| l.split("config=\"").nth(1).unwrap().split('"').next().unwrap())
            .collect();
        assert_eq!(
            configs,
            [
                "dma sim h2c 4 KiB",
                "dma sim h2c 4 KiB #2",
                "dma sim h2c 4 KiB #3",
                "dma sim h2c 4 KiB #4",
                "dma sim #2 h2c 4 KiB"
            ]
        );
    }
}
