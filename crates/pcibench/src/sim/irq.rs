//! A simulated card's interrupt signalling: what its register models raise, and what an access path
//! routes to this process (an eventfd per vector, as VFIO's `VFIO_DEVICE_SET_IRQS` hands out).
//!
//! A model names each interrupt cause it has (`source`: an XDMA channel's bit in the IRQ block, the
//! NVRAM's one line) and says whenever the cause's request changes (`set`), with the vector its
//! registers program for it. What the function signals follows its config space, as on hardware
//! (`Control`, which the config space model hands over after every write):
//! - MSI-X when its Enable bit is set (PCI Local Bus 3.0 §6.8.2.3): each rising request sends one
//!   message on its table entry, unless the entry's Mask bit or the Function Mask is set; a masked
//!   message is held pending in the PBA and sent when the mask clears (§6.8.2.9-10), so nothing is
//!   lost and nothing is flagged.
//! - MSI when its Enable bit is set: one message per rising request; with fewer vectors enabled
//!   than programmed only the low bits of the vector number are kept (Multiple Message Enable,
//!   §6.8.1.3).
//! - INTx otherwise, unless the command register's Interrupt Disable is set (§6.2.2): a level
//!   (§2.2.6), asserted while any cause requests. As vfio-pci does (`vfio_intx_handler`), the line
//!   is masked when it fires and stays masked until the handler unmasks it, so an asserted level
//!   never storms; unmasking while still asserted fires again. A function with MSI or MSI-X
//!   enabled never asserts INTx (§6.8.1).
//!
//! Where the messages land is the routing (`route`): an eventfd per vector, the host side that
//! VFIO's SET_IRQS sets up together with the enables (`access::sim` does both, as vfio-pci).
//!
//! What a driver makes the card do that real hardware would act on badly is a protocol violation:
//! a cause raised with nothing to service it (no vector routed, or another kind routed than the
//! function signals: a missed interrupt), a message on a vector no eventfd stands behind, and an
//! INTx that fires again at an unmask twice with no cause cleared in between (a storm: the handler
//! acknowledged nothing). Once is no fault: vfio-pci re-sends a level still asserted at an unmask
//! (`vfio_pci_intx_unmask_handler`), and QEMU without KVM unmasks at the handler's first BAR access
//! (hw/vfio/pci.c `vfio_intx_eoi`), before the handler has cleared anything (umem.c's reads its
//! status first).
//!
//! The models raise inside whatever brings them to now (a register access, a poll, the sim
//! interrupt waiter's timer: `datapath.rs`), so in the stepped mode (docs/determinism.md) every
//! interrupt is signalled before the access that caused it returns.

use crate::{Error, Result};
use rustix::event::{eventfd, EventfdFlags};
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex};

/// How a simulated card signals (the sim's own words for `access::IrqKind`: `sim` sits below
/// `access` and names nothing of it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    Intx,
    Msi,
    MsiX,
}

impl std::fmt::Display for Signal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Signal::Intx => "INTx",
            Signal::Msi => "MSI",
            Signal::MsiX => "MSI-X",
        })
    }
}

/// What a card's function offers: vectors per kind (0: the kind is absent), and where its MSI-X
/// table and Pending Bit Array sit in the BAR its register model answers (PCI Local Bus 3.0
/// §6.8.2.4-5: the capability's BIR names that BAR).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Offers {
    pub msix: u32,
    pub msi: u32,
    pub intx: bool,
    /// The INTx pin the function reports (config byte 0x3D, 1-4 for INTA-INTD) where `intx`.
    pub pin: u8,
    /// Whether the command register's Interrupt Disable masks INTx (PCI 2.3 and every PCI
    /// Express function); a card from before PCI 2.3 keeps the bit and asserts INTx regardless.
    pub intx_maskable: bool,
    /// Offsets of the MSI-X table and the PBA in the card's register BAR (unused without MSI-X).
    pub msix_table: u32,
    pub msix_pba: u32,
}

impl Offers {
    /// An INTx pin that Interrupt Disable does not mask (before PCI 2.3), and nothing else.
    pub const LEGACY_INTX: Offers =
        Offers { msix: 0, msi: 0, intx: true, pin: 1, intx_maskable: false, msix_table: 0, msix_pba: 0 };

    /// Vectors the function has of `kind` (INTx: 1 where it has a pin).
    pub fn vectors(&self, kind: Signal) -> u32 {
        match kind {
            Signal::MsiX => self.msix,
            Signal::Msi => self.msi,
            Signal::Intx => self.intx as u32,
        }
    }
}

/// The function's interrupt enables as its config space holds them (handed over by the config
/// space model after every write).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Control {
    /// MSI-X Message Control bits 15 (Enable) and 14 (Function Mask).
    pub msix_enabled: bool,
    pub msix_masked: bool,
    /// MSI Message Control bit 0 (Enable) and Multiple Message Enable as a count (1 to 32).
    pub msi_enabled: bool,
    pub msi_vectors: u32,
    /// Command register bit 10, Interrupt Disable.
    pub intx_disabled: bool,
}

/// An MSI-X table entry's bytes: Message Address, Upper Address, Data, Vector Control (§6.8.2.6-9).
const ENTRY: usize = 16;
const VECTOR_CONTROL: usize = 12;
/// Vector Control bit 0: masked. Set at reset (§6.8.2.9).
const VECTOR_MASKED: u8 = 1;

/// The interrupts of one simulated card.
pub struct SimIrq {
    card: &'static str,
    offers: Offers,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Routed kind and an eventfd per vector; None while nothing is routed.
    routed: Option<(Signal, Arc<Vec<OwnedFd>>)>,
    /// The config space's enables.
    ctl: Control,
    /// The MSI-X table, 16 bytes an entry, and the PBA, one bit an entry.
    table: Vec<u8>,
    pba: Vec<u8>,
    /// Causes requesting now: bit `source`.
    level: u64,
    /// INTx: masked since it fired, until `unmask`.
    masked: bool,
    /// INTx: a cause was cleared since the line last fired.
    cleared: bool,
    /// INTx: the line fired again at an unmask with no cause cleared, and none was cleared since
    /// (another such unmask is a storm).
    early: bool,
    /// Interrupts signalled per vector, for tests and reports.
    sent: Vec<u64>,
    violations: Vec<String>,
}

/// Violations kept: the first ones say what went wrong; a model raising with nothing routed for a
/// whole run (a user's model served over vfio-user to a polling client) must not grow this.
const MAX_VIOLATIONS: usize = 64;

impl State {
    fn violate(&mut self, v: String) {
        if self.violations.len() < MAX_VIOLATIONS {
            self.violations.push(v);
        }
    }
}

impl SimIrq {
    pub fn new(card: &'static str, offers: Offers) -> SimIrq {
        let n = offers.msix as usize;
        let mut table = vec![0u8; n * ENTRY];
        for e in 0..n {
            table[e * ENTRY + VECTOR_CONTROL] = VECTOR_MASKED;
        }
        let state = State { table, pba: vec![0; n.div_ceil(64) * 8], ..State::default() };
        SimIrq { card, offers, state: Mutex::new(state) }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn offers(&self) -> Offers {
        self.offers
    }

    /// How the function signals now, from its enables (None: INTx disabled and no message
    /// kind enabled, or no pin).
    fn signalling(&self, s: &State) -> Option<Signal> {
        if s.ctl.msix_enabled && self.offers.msix > 0 {
            Some(Signal::MsiX)
        } else if s.ctl.msi_enabled && self.offers.msi > 0 {
            Some(Signal::Msi)
        } else if self.offers.intx && !(s.ctl.intx_disabled && self.offers.intx_maskable) {
            Some(Signal::Intx)
        } else {
            None
        }
    }

    /// How the function signals now (its config space's enables).
    pub fn signals(&self) -> Option<Signal> {
        self.signalling(&self.state())
    }

    /// The config space's enables changed. INTx enabled again with a cause requesting asserts the
    /// line; an MSI-X function mask lifted sends what its unmasked entries hold pending.
    pub fn set_control(&self, ctl: Control) {
        let mut s = self.state();
        let before = self.signalling(&s);
        s.ctl = ctl;
        let now = self.signalling(&s);
        let intx_routed = matches!(s.routed, Some((Signal::Intx, _)));
        if now == Some(Signal::Intx) && before != now && s.level != 0 && intx_routed && !s.masked {
            Self::fire(&mut s, 0);
        }
        self.send_pending(&mut s);
    }

    /// Route `vectors` vectors of `kind` to fresh eventfds (one routing at a time, as VFIO allows
    /// one trigger per index). Returns the vectors granted: at most what the function has. The
    /// function's enables are its config space's: an access path sets them as vfio-pci does.
    pub fn route(&self, kind: Signal, vectors: u32) -> Result<u32> {
        let has = self.offers.vectors(kind);
        if has == 0 {
            return Err(Error::Unsupported(format!("the simulated card {} has no {kind} capability", self.card)));
        }
        let granted = match kind {
            // MSI grants a power of two (Multiple Message Enable), at most what is capable.
            Signal::Msi => vectors.clamp(1, has).next_power_of_two().min(has),
            Signal::MsiX => vectors.clamp(1, has),
            Signal::Intx => 1,
        };
        let mut fds = Vec::new();
        for _ in 0..granted {
            fds.push(eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK).map_err(|e| {
                Error::Unsupported(format!("cannot create an eventfd for the simulated card's interrupt: {e}"))
            })?);
        }
        let mut s = self.state();
        if s.routed.is_some() {
            return Err(Error::usage(format!(
                "the simulated card {}'s interrupts are routed already: one user at a time",
                self.card
            )));
        }
        s.routed = Some((kind, Arc::new(fds)));
        (s.masked, s.cleared, s.early) = (false, true, false);
        s.sent = vec![0; granted as usize];
        // A level already asserted fires as soon as INTx is routed (an MSI edge has passed).
        if kind == Signal::Intx && s.level != 0 && self.signalling(&s) == Some(Signal::Intx) {
            Self::fire(&mut s, 0);
        }
        Ok(granted)
    }

    /// Tear the routing down (the eventfds close); the causes stay as the card holds them.
    pub fn unroute(&self) {
        self.state().routed = None;
    }

    /// The eventfds of the routing, one per vector, for an access path to wait on (kept open
    /// by the holder after an `unroute`).
    pub fn fds(&self) -> Option<Arc<Vec<OwnedFd>>> {
        self.state().routed.as_ref().map(|(_, f)| Arc::clone(f))
    }

    /// Cause `source` (below 64) requests (`on`) or not, programmed for `vector`; `what` names it
    /// for a violation. Called by the models whenever a request, its enable or its vector changes.
    pub fn set(&self, source: u32, vector: u32, on: bool, what: impl FnOnce() -> String) {
        let bit = 1u64 << (source & 63);
        let mut s = self.state();
        let was = s.level & bit != 0;
        if on == was {
            return;
        }
        if !on {
            s.level &= !bit;
            (s.cleared, s.early) = (true, false);
            return;
        }
        s.level |= bit;
        match self.signalling(&s) {
            Some(Signal::Intx) => Self::assert_intx(&mut s, what),
            Some(_) => self.send(&mut s, vector, what),
            // Interrupt Disable set: the level shows in the Interrupt Status bit only, and
            // asserts INTx when software clears the bit (`set_control`).
            None if self.offers.intx => {}
            None => {
                let v = format!(
                    "{} and nothing services interrupts (MSI-X is not enabled, and there is no INTx pin)",
                    what()
                );
                s.violate(v);
            }
        }
    }

    /// One message on `vector` (MSI-X or MSI: an event with no level behind it, as a QDMA queue's
    /// writeback interrupt); `what` names it for a violation.
    pub fn message(&self, vector: u32, what: impl FnOnce() -> String) {
        // A staged pass sends it after the writes before it (`stage.rs`).
        let mut what = Some(what);
        if super::stage::keep(|| super::stage::Op::Message(vector, what.take().map_or_else(String::new, |w| w()))) {
            return;
        }
        let Some(what) = what else { return };
        let mut s = self.state();
        match self.signalling(&s) {
            Some(Signal::MsiX | Signal::Msi) => self.send(&mut s, vector, what),
            _ if s.routed.is_none() => {
                let v = format!("{} and nothing services interrupts (no vector is routed)", what());
                s.violate(v);
            }
            _ => {
                let v = format!("{}, but neither MSI-X nor MSI is enabled: the message goes nowhere", what());
                s.violate(v);
            }
        }
    }

    /// INTx asserted (not masked by the host since it last fired): signalled where INTx is routed.
    fn assert_intx(s: &mut State, what: impl FnOnce() -> String) {
        match s.routed.as_ref().map(|(k, _)| *k) {
            Some(Signal::Intx) => {
                if !s.masked {
                    Self::fire(s, 0);
                }
            }
            Some(k) => {
                let v = format!("{} on INTx, but {k} is routed: nothing services the line", what());
                s.violate(v);
            }
            None => {
                let v = format!("{} and nothing services interrupts (no vector is routed)", what());
                s.violate(v);
            }
        }
    }

    /// A message on `vector` as the enabled kind sends it: MSI-X held pending while its entry or
    /// the function is masked, MSI folded to the enabled vectors.
    fn send(&self, s: &mut State, vector: u32, what: impl FnOnce() -> String) {
        let kind = if s.ctl.msix_enabled { Signal::MsiX } else { Signal::Msi };
        let vector = match kind {
            Signal::MsiX if vector >= self.offers.msix => {
                let v = format!(
                    "{} on MSI-X vector {vector}, but the table has {} entries: the message goes nowhere",
                    what(),
                    self.offers.msix
                );
                s.violate(v);
                return;
            }
            Signal::MsiX
                if s.ctl.msix_masked || s.table[vector as usize * ENTRY + VECTOR_CONTROL] & VECTOR_MASKED != 0 =>
            {
                s.pba[vector as usize / 8] |= 1 << (vector % 8);
                return;
            }
            Signal::MsiX => vector,
            _ => vector & (s.ctl.msi_vectors.clamp(1, 32).next_power_of_two() - 1),
        };
        match s.routed.as_ref() {
            Some((k, fds)) if *k == kind && (vector as usize) < fds.len() => Self::fire(s, vector),
            Some((k, fds)) if *k == kind => {
                let v = format!(
                    "{} on {kind} vector {vector}, but only {} vectors are routed: the message goes nowhere",
                    what(),
                    fds.len()
                );
                s.violate(v);
            }
            Some((k, _)) => {
                let v = format!("{} by {kind}, but {k} is routed: the message goes nowhere", what());
                s.violate(v);
            }
            None => {
                let v = format!("{} and nothing services interrupts (no vector is routed)", what());
                s.violate(v);
            }
        }
    }

    /// Send what the PBA holds for entries no longer masked (§6.8.2.10), clearing their bits.
    fn send_pending(&self, s: &mut State) {
        if !s.ctl.msix_enabled || s.ctl.msix_masked {
            return;
        }
        for v in 0..self.offers.msix {
            let (byte, bit) = (v as usize / 8, 1u8 << (v % 8));
            if s.pba[byte] & bit != 0 && s.table[v as usize * ENTRY + VECTOR_CONTROL] & VECTOR_MASKED == 0 {
                s.pba[byte] &= !bit;
                self.send(s, v, || format!("MSI-X vector {v}'s pending message"));
            }
        }
    }

    /// The register BAR's bytes at `offset` that are the MSI-X table or PBA: which structure,
    /// and the offset in it. None: the access is the model's.
    fn structure(&self, offset: u64, len: usize) -> Option<(bool, usize)> {
        let n = self.offers.msix as u64;
        let inside = |base: u32, size: u64| {
            let base = base as u64;
            (offset >= base && offset + len as u64 <= base + size).then(|| (offset - base) as usize)
        };
        if n == 0 {
            return None;
        }
        inside(self.offers.msix_table, n * ENTRY as u64)
            .map(|o| (true, o))
            .or_else(|| inside(self.offers.msix_pba, n.div_ceil(64) * 8).map(|o| (false, o)))
    }

    /// A read of `len` bytes (1 to 8) of the register BAR at `offset`: Some(value) where it is the
    /// MSI-X table or PBA, None where it is the model's.
    pub fn table_read(&self, offset: u64, len: usize) -> Option<u64> {
        let (table, at) = self.structure(offset, len)?;
        let s = self.state();
        let src = if table { &s.table } else { &s.pba };
        Some(src[at..at + len].iter().rev().fold(0u64, |a, &b| (a << 8) | b as u64))
    }

    /// A write of `len` bytes (1 to 8) of the register BAR at `offset`: true where it was the MSI-X
    /// table or PBA (the PBA is read-only; of Vector Control only the Mask bit is writable, and
    /// the address's two low bits read 0: §6.8.2.6-9), false where it is the model's.
    pub fn table_write(&self, offset: u64, len: usize, value: u64) -> bool {
        let Some((table, at)) = self.structure(offset, len) else { return false };
        if !table {
            return true;
        }
        let mut s = self.state();
        for (i, b) in value.to_le_bytes()[..len].iter().enumerate() {
            let o = at + i;
            s.table[o] = match o % ENTRY {
                0 => b & !0x3,
                VECTOR_CONTROL => b & VECTOR_MASKED,
                13..=15 => 0,
                _ => *b,
            };
        }
        self.send_pending(&mut s);
        true
    }

    /// Whether MSI-X entry `vector`'s message is pending in the PBA.
    pub fn pending(&self, vector: u32) -> bool {
        self.state().pba.get(vector as usize / 8).is_some_and(|b| b & (1 << (vector % 8)) != 0)
    }

    /// INTx: the handler unmasks the line (vfio-pci's unmask eventfd or VFIO_IRQ_SET_ACTION_UNMASK).
    /// A level still asserted fires again at once (vfio-pci re-sends it); doing so a second time with
    /// no cause cleared since the first is a storm, which the model flags.
    pub fn unmask(&self) {
        let mut s = self.state();
        if !matches!(s.routed, Some((Signal::Intx, _))) || !s.masked {
            return;
        }
        s.masked = false;
        if s.level != 0 && self.signalling(&s) == Some(Signal::Intx) {
            if !s.cleared && std::mem::replace(&mut s.early, true) {
                let v = format!(
                    "INTx storm: the line was unmasked with its level still asserted (causes {:#x}), again, and no \
                     cause cleared since it fired: the handler acknowledged nothing",
                    s.level
                );
                s.violate(v);
            }
            Self::fire(&mut s, 0);
        }
    }

    /// Signal `vector`'s eventfd; INTx masks the line.
    fn fire(s: &mut State, vector: u32) {
        let Some((kind, fds)) = s.routed.as_ref() else { return };
        if let Some(fd) = fds.get(vector as usize) {
            // An eventfd write of 1 only fails when the counter would overflow (2^64 - 2 signals
            // nobody read): the count is lost, never the wake-up.
            let _ = rustix::io::write(fd, &1u64.to_ne_bytes());
        }
        if *kind == Signal::Intx {
            (s.masked, s.cleared) = (true, false);
        }
        if let Some(n) = s.sent.get_mut(vector as usize) {
            *n += 1;
        }
    }

    /// Whether INTx is asserted now (any cause requesting): the Interrupt Status bit (§6.2.3).
    pub fn level(&self) -> bool {
        self.state().level != 0
    }

    /// Interrupts signalled per vector since the routing began.
    pub fn sent(&self) -> Vec<u64> {
        self.state().sent.clone()
    }

    /// The violations seen, oldest first.
    pub fn violations(&self) -> Vec<String> {
        self.state().violations.clone()
    }
}

#[cfg(test)]
#[path = "irq_tests.rs"]
mod tests;
