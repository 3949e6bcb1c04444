//! Saved runs (`--save FILE.json`): a measuring command's whole result, with what is needed to
//! judge it later: where and when it ran (the reports' `Context`: pcibench version, command line,
//! time, host, kernel, CPU model, the CPU and NUMA nodes), the device's ids and link (speed,
//! width, MPS, MRRS), the access path and IOMMU mode, and what changed in the link's health
//! during the run. The format is versioned (`format`, `version`; docs/results.md "Saved runs"); a reader
//! refuses in one line a truncated file, JSON that is not a saved run (naming which pcibench
//! output it is, when it is one) and a version newer than it knows.

use crate::access::Via;
use crate::bench::context::Context;
use crate::bench::result::{Report, Row};
use crate::dma::Addressing;
use crate::file::Destination;
use crate::host::state::IommuState;
use crate::host::Host;
use crate::pci::DeviceInfo;
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The `format` field of every saved run.
pub const FORMAT: &str = "pcibench-run";
/// The newest version this pcibench writes and reads. Raise it when a reader of the previous
/// version would misread a new file (a field changes meaning or type); new optional fields do
/// not need it.
pub const VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SavedRun {
    pub format: String,
    pub version: u32,
    /// The measuring command: pio, dma, buffers, run, ...
    pub command: String,
    /// Where and when it ran (the first report's; every report keeps its own).
    pub context: Option<Context>,
    /// None for a run on no device (`pcibench buffers` without --device).
    pub device: Option<SavedDevice>,
    /// The access path of the (first) report, and for DMA what the card was given as addresses.
    pub via: Option<Via>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addressing: Option<Addressing>,
    /// The kernel's IOMMU setup for the device; None on a simulated card.
    pub iommu: Option<IommuState>,
    /// What changed in the link's health during the run (empty: nothing); None where no link
    /// was watched (a simulated card).
    pub link_health: Option<Vec<String>>,
    /// One report per measured part: one for pio/dma/buffers, PIO then DMA for `run`.
    pub reports: Vec<Report>,
    /// `run`: why a part did not run, or ran only in part.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// What was asked for (`measure::Request`): absent in files written before runs kept it,
    /// and skipped when a newer pcibench wrote one this version cannot read.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "lenient")]
    pub request: Option<crate::measure::Request>,
}

/// The request if this version can read it; a request is context, never a reason to refuse a
/// file.
fn lenient<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Option<crate::measure::Request>, D::Error> {
    let v = serde_json::Value::deserialize(d)?;
    Ok(serde_json::from_value(v).ok())
}

/// The device's identity and link, as saved (ids as lspci prints them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedDevice {
    pub address: String,
    pub simulated: bool,
    pub vendor_id: String,
    pub device_id: String,
    pub subsystem_vendor_id: String,
    pub subsystem_device_id: String,
    pub class_code: String,
    pub revision: u8,
    pub name: String,
    pub driver: Option<String>,
    pub numa_node: Option<i32>,
    /// None: no PCIe link (conventional PCI, an emulated device without one).
    pub link: Option<SavedLink>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedLink {
    pub current_speed: Option<String>,
    pub current_gen: Option<u8>,
    pub current_width: Option<u8>,
    pub max_gen: Option<u8>,
    pub max_width: Option<u8>,
    pub mps: Option<u32>,
    pub mrrs: Option<u32>,
    pub degraded: bool,
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or("?".into(), |v| v.to_string())
}

impl SavedLink {
    /// `Gen3 x8, MPS 256, MRRS 512` (with `(max Gen3 x16, degraded)` when it trained below).
    pub fn describe(&self) -> String {
        let mut s = format!(
            "Gen{} x{}, MPS {}, MRRS {}",
            opt(self.current_gen),
            opt(self.current_width),
            opt(self.mps),
            opt(self.mrrs)
        );
        if self.degraded {
            s.push_str(&format!(" (degraded; max Gen{} x{})", opt(self.max_gen), opt(self.max_width)));
        }
        s
    }
}

impl SavedDevice {
    pub fn from_info(info: &DeviceInfo) -> SavedDevice {
        SavedDevice {
            address: info.address.clone(),
            simulated: info.simulated,
            vendor_id: format!("{:04x}", info.vendor_id),
            device_id: format!("{:04x}", info.device_id),
            subsystem_vendor_id: format!("{:04x}", info.subsystem_vendor_id),
            subsystem_device_id: format!("{:04x}", info.subsystem_device_id),
            class_code: format!("{:06x}", info.class_code),
            revision: info.revision,
            name: format!("{} {}", info.vendor_label(), info.device_label()),
            driver: info.driver.clone(),
            numa_node: info.numa_node,
            link: info.link.as_ref().map(|l| SavedLink {
                current_speed: l.current_speed.clone(),
                current_gen: l.current_gen,
                current_width: l.current_width,
                max_gen: l.max_gen,
                max_width: l.max_width,
                mps: l.mps,
                mrrs: l.mrrs,
                degraded: l.degraded,
            }),
        }
    }

    /// `10ee:7024 (subsystem 0002:0001, rev 00)`: what makes two cards the same model.
    pub fn ids(&self) -> String {
        format!(
            "{}:{} (subsystem {}:{}, rev {:02x})",
            self.vendor_id, self.device_id, self.subsystem_vendor_id, self.subsystem_device_id, self.revision
        )
    }

    /// The link in words, or why there is none.
    pub fn link_words(&self) -> String {
        match (&self.link, self.simulated) {
            (_, true) => "simulated card (host memory: no PCIe link bounds it)".into(),
            (Some(l), false) => l.describe(),
            (None, false) => "no PCIe link reported".into(),
        }
    }
}

impl SavedRun {
    /// A run of `command` on `device` (None: on no device), from its reports.
    pub fn new(
        host: &Host,
        command: &str,
        device: Option<&DeviceInfo>,
        reports: Vec<Report>,
        notes: Vec<String>,
    ) -> SavedRun {
        let context = reports.iter().find_map(|r| r.context.clone());
        let mut health: Option<Vec<String>> = None;
        for changes in reports.iter().filter_map(|r| r.context.as_ref()?.link_health.as_ref()) {
            let all = health.get_or_insert_with(Vec::new);
            all.extend(changes.iter().filter(|c| !all.contains(c)).cloned().collect::<Vec<_>>());
        }
        SavedRun {
            format: FORMAT.into(),
            version: VERSION,
            command: command.into(),
            context,
            device: device.map(SavedDevice::from_info),
            via: reports.first().map(|r| r.via),
            addressing: reports.iter().find_map(|r| r.addressing),
            iommu: match device {
                Some(d) if d.simulated => None,
                d => Some(crate::host::state::iommu_state(host, d.and_then(|d| d.iommu_group))),
            },
            link_health: health,
            reports,
            notes,
            request: None,
        }
    }

    /// A finished measurement, with the request that produced it.
    pub fn of_measurement(host: &Host, m: &crate::measure::Measurement) -> SavedRun {
        let mut run = match &m.measured {
            crate::measure::Measured::Report(r) => SavedRun::of_report(host, m.device.as_ref(), r),
            crate::measure::Measured::Suite(s) => SavedRun::of_suite(host, s),
        };
        run.request = Some(m.request.clone());
        run
    }

    /// A measuring command's report on `device` (None: on no device).
    pub fn of_report(host: &Host, device: Option<&DeviceInfo>, report: &Report) -> SavedRun {
        SavedRun::new(host, report.kind.name(), device, vec![report.clone()], Vec::new())
    }

    /// `pcibench run`'s parts.
    pub fn of_suite(host: &Host, suite: &crate::measure::SuiteReport) -> SavedRun {
        SavedRun::new(host, "run", Some(&suite.info), suite.parts().cloned().collect(), suite.notes.clone())
    }

    /// Every row with its report, in order.
    pub fn rows(&self) -> impl Iterator<Item = (&Report, &Row)> {
        self.reports.iter().flat_map(|r| r.results.iter().map(move |x| (r, x)))
    }

    /// The access path in words: `vfio (IOVA addresses)`, `sysfs`, `sim`.
    pub fn path_words(&self) -> String {
        let via = self.via.map_or("-".to_string(), |v| v.to_string());
        match self.addressing {
            Some(Addressing::Iova) => format!("{via} (IOVA addresses)"),
            Some(Addressing::Physical) => format!("{via} (physical addresses)"),
            _ => via,
        }
    }

    /// The IOMMU mode in words.
    pub fn iommu_words(&self) -> String {
        match &self.iommu {
            None => "n/a (simulated card)".into(),
            Some(s) => {
                let mut w = s.mode();
                if !s.cmdline.is_empty() {
                    w.push_str(&format!(" [{}]", s.cmdline.join(" ")));
                }
                w
            }
        }
    }
}

/// The largest saved run read: a larger file is refused before it is read, so a sparse or endless
/// file (`/dev/zero`) cannot exhaust memory. pcibench writes at most 65,536 rows a report (about
/// 70 MB); a run of 10^6 rows written compactly (no optional fields) is about 300 MB and is read.
pub const MAX_BYTES: u64 = 512 << 20;

/// The saved run as the JSON document `write` puts in the file.
pub fn to_json(run: &SavedRun) -> Result<String> {
    let mut text =
        serde_json::to_string_pretty(run).map_err(|e| Error::Device(format!("cannot encode the run as JSON: {e}")))?;
    text.push('\n');
    Ok(text)
}

/// Write `run` to `dest` whole or not at all (`file::Destination::write`: a temporary file beside
/// it, synced, renamed over the name), so an interrupted or failed save never leaves a truncated
/// file under the name.
pub fn write(dest: &Destination, run: &SavedRun) -> Result<()> {
    dest.write(to_json(run)?.as_bytes())
}

/// Read a saved run: a regular file of at most `MAX_BYTES`, opened without blocking (a FIFO or a
/// device node is refused unread), then `parse`d.
pub fn read(path: &Path) -> Result<SavedRun> {
    let (name, text) = read_bytes(path)?;
    parse_owned(&name, text)
}

/// A saved run's file, read as `read` reads it (bounded, regular, without blocking): the name
/// its refusals use, and its bytes.
pub(super) fn read_bytes(path: &Path) -> Result<(String, Vec<u8>)> {
    let name = crate::text::one_line(&path.display().to_string());
    let text = crate::file::read(path, MAX_BYTES).map_err(|e| match e.kind() {
        // A name mistyped on the command line is bad usage, like any other bad argument.
        std::io::ErrorKind::NotFound => {
            Error::usage(format!("{name}: no such file: name a file written by --save FILE.json"))
        }
        std::io::ErrorKind::FileTooLarge => Error::usage(format!(
            "{name} is larger than {} MiB, the most pcibench reads as a saved run: not read (name a file written by --save FILE.json)",
            MAX_BYTES >> 20
        )),
        std::io::ErrorKind::InvalidInput => {
            Error::usage(format!("{name}: {e}; plot and compare read files written by --save FILE.json"))
        }
        _ => Error::io("cannot read the saved run", path, e),
    })?;
    Ok((name, text))
}

/// The top of a document, read without keeping the rest: what it is, before it is read as a
/// saved run (a `serde_json::Value` of a large file would cost many times its size).
#[derive(Deserialize)]
struct Head {
    format: Option<serde_json::Value>,
    version: Option<serde_json::Value>,
    kind: Option<serde_json::Value>,
    results: Option<serde::de::IgnoredAny>,
    info: Option<serde::de::IgnoredAny>,
    pio: Option<serde::de::IgnoredAny>,
    dma: Option<serde::de::IgnoredAny>,
    checks: Option<serde::de::IgnoredAny>,
    recommended: Option<serde::de::IgnoredAny>,
    vendor_id: Option<serde::de::IgnoredAny>,
    bars: Option<serde::de::IgnoredAny>,
}

/// An element of `pcibench list --json`.
#[derive(Deserialize)]
struct Listed {
    vendor_id: Option<serde::de::IgnoredAny>,
}

/// Whether only whitespace follows serde_json's error position (1-based line, and column: the
/// bytes of that line read when it failed).
fn nothing_after(bytes: &[u8], line: usize, column: usize) -> bool {
    let start = match line {
        0 | 1 => 0,
        n => match bytes.iter().enumerate().filter(|(_, b)| **b == b'\n').nth(n - 2) {
            Some((i, _)) => i + 1,
            None => return false,
        },
    };
    bytes.get(start.saturating_add(column)..).is_none_or(|rest| rest.iter().all(u8::is_ascii_whitespace))
}

/// Parse a saved run from bytes; every refusal is one line naming the file. Strings in it are
/// made safe to print (`text::defang_json`: no control character survives), and its figures are
/// checked (`sanity`).
pub fn parse(name: &str, bytes: &[u8]) -> Result<SavedRun> {
    parse_owned(name, bytes.to_vec())
}

/// `parse`, rewriting the bytes in place (a file's whole text: no second copy of it).
fn parse_owned(name: &str, mut bytes: Vec<u8>) -> Result<SavedRun> {
    let version = admit(name, &mut bytes)?;
    let bad = |why: String| Error::usage(format!("{name} {why}"));
    let run: SavedRun =
        serde_json::from_slice(&bytes).map_err(|e| bad(format!("is a damaged saved run (version {version}): {e}")))?;
    if run.reports.is_empty() {
        return Err(bad("holds no results (its \"reports\" list is empty)".into()));
    }
    super::sanity::check(name, &run.reports)?;
    Ok(run)
}

/// Everything a saved run's text is checked for before it is read as one: not empty, whole (not
/// cut short), JSON, a saved run (or which other pcibench output it is), a version this pcibench
/// reads; its strings defanged in place. The version.
pub(super) fn admit(name: &str, bytes: &mut [u8]) -> Result<u64> {
    let bad = |why: String| Error::usage(format!("{name} {why}"));
    let hint = "plot and compare read files written by --save FILE.json";
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(bad(format!("is empty: {hint}")));
    }
    crate::text::defang_json(bytes);
    let bytes: &[u8] = bytes;
    let syntax = |e: serde_json::Error| {
        use serde_json::error::Category;
        // A file cut inside a literal or a number ("tru", "1.", "1e") is a syntax error to
        // serde_json, not an end of input: it is still a cut file when nothing follows the error.
        let cut = e.classify() == Category::Eof
            || (e.classify() == Category::Syntax && nothing_after(bytes, e.line(), e.column()));
        match e.classify() {
            _ if cut => Some(bad(format!(
                "is truncated: the JSON ends at line {}, column {} before the document is complete (was the run cut short? save it again)",
                e.line(),
                e.column()
            ))),
            Category::Eof | Category::Syntax | Category::Io => {
                Some(bad(format!("is not JSON (line {}, column {}): {hint}", e.line(), e.column())))
            }
            Category::Data => None,
        }
    };
    let head = match serde_json::from_slice::<Head>(bytes) {
        Ok(h) => Some(h),
        Err(e) => match syntax(e) {
            Some(refusal) => return Err(refusal),
            None => None,
        },
    };
    let format = head.as_ref().and_then(|h| h.format.as_ref()).and_then(|f| f.as_str());
    if format != Some(FORMAT) {
        let listed = head.is_none()
            && serde_json::from_slice::<Vec<Listed>>(bytes)
                .is_ok_and(|v| v.first().is_some_and(|d| d.vendor_id.is_some()));
        return Err(bad(match head.as_ref().and_then(what_is).or(listed.then(|| LIST.to_string())) {
            Some(what) => format!(
                "is {what}, not a saved run: it lacks the device, link and IOMMU context; measure with --save FILE.json"
            ),
            None => format!("is JSON but not a pcibench saved run (no \"format\": \"{FORMAT}\"): {hint}"),
        }));
    }
    let version = head.as_ref().and_then(|h| h.version.as_ref()).and_then(|v| v.as_u64());
    match version {
        Some(v) if v > u64::from(VERSION) => {
            return Err(bad(format!(
                "is a version {v} saved run, newer than this pcibench {} reads (version {VERSION} and older): use a newer pcibench",
                env!("CARGO_PKG_VERSION")
            )))
        }
        Some(v) if v >= 1 => {}
        _ => return Err(bad("has no valid format version (\"version\": 1, 2, ...): it is damaged".into())),
    }
    Ok(version.unwrap_or(0))
}

/// The names runs go by in plots and comparisons: `given` (`--label`) in order, then each other
/// file's name without `.json`, or its path where two names would be the same.
pub fn labels(paths: &[std::path::PathBuf], given: &[String]) -> Result<Vec<String>> {
    if given.len() > paths.len() {
        return Err(Error::usage(format!(
            "{} labels for {} files: give at most one --label per file, in the files' order",
            given.len(),
            paths.len()
        )));
    }
    let stem = |p: &std::path::PathBuf| {
        p.file_name().map(|n| n.to_string_lossy().trim_end_matches(".json").to_string()).unwrap_or_default()
    };
    let stems: Vec<String> = paths.iter().map(stem).collect();
    Ok(paths
        .iter()
        .enumerate()
        .map(|(i, p)| match given.get(i) {
            Some(l) => l.clone(),
            None if stems.iter().filter(|s| **s == stems[i]).count() > 1 => p.display().to_string(),
            None => stems[i].clone(),
        })
        .collect())
}

const LIST: &str = "`pcibench list --json` output (no measurement)";

/// Which pcibench output a JSON document is, when it is one.
fn what_is(h: &Head) -> Option<String> {
    if h.kind.is_some() && h.results.is_some() {
        let kind = crate::text::clip(h.kind.as_ref().and_then(|k| k.as_str()).unwrap_or("pio"), 16).into_owned();
        return Some(format!("`pcibench {kind} --json` output"));
    }
    if h.info.is_some() && (h.pio.is_some() || h.dma.is_some()) {
        return Some("`pcibench run --json` output".into());
    }
    if h.checks.is_some() && h.recommended.is_some() {
        return Some("`pcibench doctor --json` output (no measurement)".into());
    }
    if h.vendor_id.is_some() && h.bars.is_some() {
        return Some("`pcibench info --json` output (no measurement)".into());
    }
    None
}
