//! The PCIe link bandwidth model of pcie-bench's pcie-model (Neugebauer et al., SIGCOMM 2018):
//! raw symbol rate, data-link-layer overhead (Ack and FC-update DLLPs, SKP ordered sets), then
//! per-TLP header overhead for writes and for reads (requests one way, completions the other).

use serde::Serialize;

/// Ack/FC-update intervals in bytes, per PCIe Base Spec 5.0 Tables 2-46..2-48 and 3-7..3-9,
/// indexed [width x1..x32][MPS 128..4096]. Gen1 and Gen2 have their own tables; Gen3 and later
/// share one (the model copies Gen5's for Gen6/7).
const WIDTHS: [u8; 6] = [1, 2, 4, 8, 16, 32];
const INTERVAL_GEN1: [[u32; 6]; 6] = [
    [237, 416, 559, 1071, 2095, 4143],
    [128, 217, 289, 545, 1057, 2081],
    [73, 118, 154, 282, 538, 1050],
    [67, 107, 86, 150, 278, 534],
    [48, 72, 86, 150, 278, 534],
    [33, 45, 52, 84, 148, 276],
];
const INTERVAL_GEN2: [[u32; 6]; 6] = [
    [288, 467, 610, 1122, 2146, 4194],
    [179, 268, 340, 596, 1108, 2132],
    [124, 169, 205, 333, 589, 1101],
    [118, 158, 137, 201, 329, 585],
    [99, 123, 137, 201, 329, 585],
    [84, 96, 103, 135, 199, 237],
];
const INTERVAL_GEN3: [[u32; 6]; 6] = [
    [333, 512, 655, 1167, 2191, 4239],
    [224, 313, 385, 641, 1153, 2177],
    [169, 214, 250, 378, 634, 1146],
    [163, 203, 182, 246, 374, 630],
    [144, 168, 182, 246, 374, 630],
    [129, 141, 148, 180, 244, 372],
];
/// An Ack or FC-update DLLP on the wire: 2 B framing + 4 B DLLP + 2 B CRC.
const DLLP_BYTES: f64 = 8.0;
/// SKP ordered sets: 4 symbols every 1538 (clock compensation).
const SKIP_OVERHEAD: f64 = 4.0 / 1538.0;
/// Memory request with a 64-bit address: 8 B link framing (STP/seq + LCRC) + 4 DW header.
pub const MEM_TLP_OVERHEAD_64: u32 = 24;
/// Completion with data: 8 B framing + 3 DW header.
pub const CPL_TLP_OVERHEAD: u32 = 20;

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Link {
    /// Generation 1..=6.
    pub gen: u8,
    pub width: u8,
    pub mps: u32,
    pub mrrs: u32,
}

/// The model's limits for one transfer size, in bytes per second.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Limits {
    pub raw: f64,
    pub tlp: f64,
    pub write: f64,
    pub read: f64,
}

pub fn gen_gts(gen: u8) -> Option<f64> {
    Some(match gen {
        1 => 2.5,
        2 => 5.0,
        3 => 8.0,
        4 => 16.0,
        5 => 32.0,
        6 => 64.0,
        _ => return None,
    })
}

/// The speed as sysfs writes `current_link_speed` (`5.0 GT/s PCIe`), for a generation.
pub fn speed_name(gen: u8) -> Option<String> {
    gen_gts(gen).map(|g| format!("{g:.1} GT/s PCIe"))
}

/// Parse sysfs `current_link_speed` such as `5.0 GT/s PCIe` or `8 GT/s` into a generation.
pub fn gen_from_speed(text: &str) -> Option<u8> {
    let gts: f64 = text.split_whitespace().next()?.parse().ok()?;
    (1..=6).find(|g| gen_gts(*g).is_some_and(|x| (x - gts).abs() < 0.01))
}

impl Link {
    /// Raw bandwidth per direction after line encoding, bytes/s.
    pub fn raw_bps(&self) -> f64 {
        let gts = gen_gts(self.gen).unwrap_or(0.0);
        let enc = match self.gen {
            1 | 2 => 8.0 / 10.0,
            3..=5 => 128.0 / 130.0,
            // Gen6 FLIT mode, a first approximation as in the model.
            _ => 242.0 / 256.0,
        };
        gts * 1e9 * enc * self.width as f64 / 8.0
    }

    /// Bandwidth left for TLPs after Ack/FC DLLPs and SKP ordered sets, bytes/s.
    pub fn tlp_bps(&self) -> f64 {
        let table = match self.gen {
            1 => &INTERVAL_GEN1,
            2 => &INTERVAL_GEN2,
            _ => &INTERVAL_GEN3,
        };
        // Widths between table rows (x12) use the next narrower row: more overhead, a safe limit.
        let wi = WIDTHS.iter().rposition(|w| *w <= self.width.max(1)).unwrap_or(0);
        let mi = (self.mps.clamp(128, 4096).trailing_zeros() - 7) as usize;
        let interval = table[wi][mi.min(5)] as f64;
        let overhead = 2.0 * DLLP_BYTES / interval + SKIP_OVERHEAD;
        self.raw_bps() * (1.0 - overhead)
    }

    /// Posted writes of `size` bytes split at MPS: efficiency = size / (size + TLPs × 24).
    pub fn write_bps(&self, size: u64) -> f64 {
        let size = size.max(1) as f64;
        let tlps = (size / self.mps as f64).ceil();
        self.tlp_bps() * size / (size + tlps * MEM_TLP_OVERHEAD_64 as f64)
    }

    /// Reads of `size` bytes: requests split at MRRS go one way, completions split at MPS
    /// come back; the rate is bounded by whichever direction saturates first.
    pub fn read_bps(&self, size: u64) -> f64 {
        let size = size.max(1) as f64;
        let tlp = self.tlp_bps();
        let cpl_bytes = size + (size / self.mps as f64).ceil() * CPL_TLP_OVERHEAD as f64;
        let req_bytes = (size / self.mrrs as f64).ceil() * MEM_TLP_OVERHEAD_64 as f64;
        let by_cpl = tlp * size / cpl_bytes;
        let by_req = tlp * size / req_bytes;
        by_cpl.min(by_req)
    }

    pub fn limits(&self, size: u64) -> Limits {
        Limits { raw: self.raw_bps(), tlp: self.tlp_bps(), write: self.write_bps(size), read: self.read_bps(size) }
    }

    pub fn describe(&self) -> String {
        format!(
            "Gen{} x{} ({} GT/s), MPS {}, MRRS {}",
            self.gen,
            self.width,
            gen_gts(self.gen).unwrap_or(0.0),
            self.mps,
            self.mrrs
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(got: f64, want_gbs: f64) {
        let g = got / 1e9;
        assert!((g - want_gbs).abs() / want_gbs < 0.01, "got {g:.3} GB/s, want {want_gbs}");
    }

    fn link(gen: u8, width: u8) -> Link {
        Link { gen, width, mps: 256, mrrs: 512 }
    }

    #[test]
    fn worked_numbers_from_reference() {
        close(link(2, 4).write_bps(256), 1.65);
        close(link(2, 4).read_bps(256), 1.68);
        close(link(3, 4).write_bps(4096), 3.3);
        close(link(3, 8).write_bps(256), 6.61);
        close(link(3, 16).write_bps(1 << 20), 12.99);
        close(link(4, 16).write_bps(1 << 20), 25.99);
        close(link(5, 16).write_bps(256), 51.98);
        close(link(5, 16).write_bps(1 << 20), 51.98);
    }

    #[test]
    fn small_transfers_pay_header_overhead() {
        let l = link(2, 4);
        // 8 B in a 32 B TLP: a quarter of the TLP bandwidth.
        assert!((l.write_bps(8) / l.tlp_bps() - 0.25).abs() < 1e-9);
        assert!(l.read_bps(8) < l.read_bps(256));
        assert!(l.raw_bps() > l.tlp_bps());
    }

    #[test]
    fn speeds_parse() {
        assert_eq!(gen_from_speed("5.0 GT/s PCIe"), Some(2));
        assert_eq!(gen_from_speed("8.0 GT/s PCIe"), Some(3));
        assert_eq!(gen_from_speed("2.5 GT/s"), Some(1));
        assert_eq!(gen_from_speed("Unknown"), None);
    }
}
