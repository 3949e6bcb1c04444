//! `--format openmetrics`: the Prometheus text exposition format (version 0.0.4, what
//! node_exporter's textfile collector and Prometheus read; https://prometheus.io/docs/instrumenting/exposition_formats/).
//! Every family has its HELP and TYPE lines and its samples together; names follow Prometheus'
//! rules (`pcibench_` prefix, base units in the name: `_seconds`, `_bytes_per_second`, `_gts`
//! for GT/s; counters end in `_total`); label values are escaped (`\\`, `\"`, `\n`).
//! `health` renders a link-health check, `saved_run` a measuring command's `--save` file.

use crate::health::{HealthReport, Status};
use crate::results::config::Config;
use crate::results::saved::SavedRun;
use std::collections::{HashMap, HashSet};
use std::fmt::Write;

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

/// A measuring command's saved run (`--save`): per configuration, throughput median and p5/p95,
/// per-transfer latency percentiles, and a latency run's percentiles as a summary.
pub fn saved_run(run: &SavedRun) -> String {
    use Kind::*;
    let mut e = Exposition::default();
    let device = run.device.as_ref().map_or(String::new(), |d| d.address.clone());
    let base = l(&[("command", &run.command), ("device", &device)]);
    let mut info = base.clone();
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
    // Labels given so far, and per configuration the next `#k` to try: a run of n rows of one
    // configuration costs n lookups, not n^2/2 (a Vec searched from `#2` up each time made
    // 10^5 rows take minutes; issue 43).
    let mut seen: HashSet<String> = HashSet::new();
    let mut next: HashMap<String, usize> = HashMap::new();
    for (report, row) in run.rows() {
        let c = Config::of(report, row);
        let words = c.label();
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
        let mut id = base.clone();
        id.extend(l(&[
            ("config", &label),
            ("kind", c.kind.name()),
            ("dir", &c.dir.to_string()),
            ("size_bytes", &c.size.to_string()),
        ]));
        let with = |k: &str, v: &str| {
            let mut x = id.clone();
            x.push((k.into(), v.into()));
            x
        };
        if let Some(s) = &row.stats {
            for (stat, mbps) in [("median", s.median_mbps), ("p5", s.p5_mbps), ("p95", s.p95_mbps)] {
                e.add(
                    "pcibench_throughput_bytes_per_second",
                    Gauge,
                    "Throughput of a configuration over its samples (stat: median, p5, p95), bytes per second.",
                    with("stat", stat),
                    mbps * 1e6,
                );
            }
            // `stat`, not `quantile`: that label belongs to summaries (promtool check metrics), and these
            // percentiles come with no sum or count of their own.
            for (q, us) in [
                ("p50", s.latency.p50_us),
                ("p90", s.latency.p90_us),
                ("p99", s.latency.p99_us),
                ("p999", s.latency.p999_us),
            ] {
                e.add(
                    "pcibench_transfer_latency_seconds",
                    Gauge,
                    "Time of one transfer in a throughput configuration, by percentile (stat: p50, p90, p99, p999), seconds.",
                    with("stat", q),
                    us / 1e6,
                );
            }
        }
        if let Some(lat) = &row.latency {
            for (q, ns) in [
                ("0.5", lat.p50_ns),
                ("0.9", lat.p90_ns),
                ("0.99", lat.p99_ns),
                ("0.999", lat.p999_ns),
                ("0.9999", lat.p9999_ns),
            ] {
                e.add(
                    "pcibench_latency_seconds",
                    Summary,
                    "Single-access latency of a configuration, seconds.",
                    with("quantile", q),
                    ns / 1e9,
                );
            }
            e.add_suffixed(
                "pcibench_latency_seconds",
                Summary,
                "",
                "_sum",
                id.clone(),
                lat.mean_ns * lat.samples as f64 / 1e9,
            );
            e.add_suffixed("pcibench_latency_seconds", Summary, "", "_count", id.clone(), lat.samples as f64);
        }
        if let Some(v) = &row.verify {
            let ok = matches!(v, crate::bench::result::Verify::Ok);
            e.add(
                "pcibench_verified",
                Gauge,
                "1 when the configuration's data verified, 0 when it did not.",
                id.clone(),
                f64::from(u8::from(ok)),
            );
        }
    }
    e.render()
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
