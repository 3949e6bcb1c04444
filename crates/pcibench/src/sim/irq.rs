//! A simulated card's interrupt signalling: what its register models raise, and what an access path
//! routes to this process (an eventfd per vector, as VFIO's `VFIO_DEVICE_SET_IRQS` hands out).
//!
//! A model names each interrupt cause it has (`source`: an XDMA channel's bit in the IRQ block, the
//! NVRAM's one line) and says whenever the cause's request changes (`set`), with the vector its
//! registers program for it. The signalling follows the kind routed:
//! - MSI-X and MSI are edge messages (PCI Local Bus 3.0 §6.8): a rising request sends one message
//!   on its vector; MSI with fewer vectors enabled than programmed keeps only the low bits of the
//!   vector number (the Multiple Message Enable field, §6.8.1.3).
//! - INTx is a level (§2.2.6): asserted while any cause requests. As vfio-pci does
//!   (`vfio_intx_handler`), the line is masked when it fires and stays masked until the handler
//!   unmasks it, so an asserted level never storms; unmasking while still asserted fires again.
//!
//! What a driver makes the card do that real hardware would act on badly is a protocol violation:
//! a cause raised with no vector routed (an interrupt nothing services: a missed interrupt), a
//! vector the routed kind does not have, and an INTx unmasked while the level is still asserted
//! with no cause cleared since it fired (a storm: the handler acknowledged nothing).
//!
//! The models raise inside the register accesses (or their engine workers), so in the stepped mode
//! (docs/determinism.md) every interrupt is signalled before the access that caused it returns.

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

/// What a card's function offers: vectors per kind (0: the kind is absent).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Offers {
    pub msix: u32,
    pub msi: u32,
    pub intx: bool,
}

impl Offers {
    /// Vectors the function has of `kind` (INTx: 1 where it has a pin).
    pub fn vectors(&self, kind: Signal) -> u32 {
        match kind {
            Signal::MsiX => self.msix,
            Signal::Msi => self.msi,
            Signal::Intx => self.intx as u32,
        }
    }
}

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
    /// Causes requesting now: bit `source`.
    level: u64,
    /// INTx: masked since it fired, until `unmask`.
    masked: bool,
    /// INTx: a cause was cleared since the line last fired (an unmask after none is a storm).
    cleared: bool,
    /// Interrupts signalled per vector, for tests and reports.
    sent: Vec<u64>,
    violations: Vec<String>,
}

impl SimIrq {
    pub fn new(card: &'static str, offers: Offers) -> SimIrq {
        SimIrq { card, offers, state: Mutex::default() }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn offers(&self) -> Offers {
        self.offers
    }

    /// Route `vectors` vectors of `kind` to fresh eventfds (one routing at a time, as VFIO allows
    /// one trigger per index). Returns the vectors granted: at most what the function has.
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
        (s.masked, s.cleared) = (false, true);
        s.sent = vec![0; granted as usize];
        // A level already asserted fires as soon as INTx is routed (an MSI edge has passed).
        if kind == Signal::Intx && s.level != 0 {
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
            s.cleared = true;
            return;
        }
        s.level |= bit;
        let kind = s.routed.as_ref().map(|(k, _)| *k);
        match kind {
            None => {
                let v = format!("{} and nothing services interrupts (no vector is routed)", what());
                s.violations.push(v);
            }
            Some(Signal::Intx) => {
                if !s.masked {
                    Self::fire(&mut s, 0);
                }
            }
            Some(Signal::Msi) => {
                let n = s.sent.len() as u32;
                Self::fire(&mut s, vector & (n - 1));
            }
            Some(Signal::MsiX) => {
                if (vector as usize) < s.sent.len() {
                    Self::fire(&mut s, vector);
                } else {
                    let v = format!(
                        "{} on MSI-X vector {vector}, but only {} vectors are routed: the message goes nowhere",
                        what(),
                        s.sent.len()
                    );
                    s.violations.push(v);
                }
            }
        }
    }

    /// One message on `vector` (MSI-X or MSI: an event with no level behind it, as a QDMA queue's
    /// writeback interrupt); `what` names it for a violation.
    pub fn message(&self, vector: u32, what: impl FnOnce() -> String) {
        let mut s = self.state();
        let kind = s.routed.as_ref().map(|(k, _)| *k);
        let n = s.sent.len() as u32;
        match kind {
            Some(Signal::MsiX) if vector < n => Self::fire(&mut s, vector),
            Some(Signal::Msi) => Self::fire(&mut s, vector & (n - 1)),
            Some(k) => {
                let v = format!("{} on {k} vector {vector}, which is not routed: the message goes nowhere", what());
                s.violations.push(v);
            }
            None => {
                let v = format!("{} and nothing services interrupts (no vector is routed)", what());
                s.violations.push(v);
            }
        }
    }

    /// INTx: the handler unmasks the line (vfio-pci's unmask eventfd or VFIO_IRQ_SET_ACTION_UNMASK).
    /// A level still asserted fires again at once; with no cause cleared since it last fired that
    /// is a storm, which the model flags.
    pub fn unmask(&self) {
        let mut s = self.state();
        if !matches!(s.routed, Some((Signal::Intx, _))) || !s.masked {
            return;
        }
        s.masked = false;
        if s.level != 0 {
            if !s.cleared {
                let v = format!(
                    "INTx storm: the line was unmasked with its level still asserted (causes {:#x}) and no cause \
                     cleared since it fired: the handler acknowledged nothing",
                    s.level
                );
                s.violations.push(v);
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

    /// Whether INTx is asserted now (any cause requesting), for tests.
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
mod tests {
    use super::*;

    use std::os::fd::{AsFd, BorrowedFd};

    fn pending(fd: BorrowedFd<'_>) -> u64 {
        let mut v = [0u8; 8];
        rustix::io::read(fd, &mut v).map_or(0, |_| u64::from_ne_bytes(v))
    }

    fn all() -> Offers {
        Offers { msix: 4, msi: 4, intx: true }
    }

    #[test]
    fn msix_sends_one_message_per_rising_request_on_its_vector() {
        let irq = SimIrq::new("t", all());
        assert_eq!(irq.route(Signal::MsiX, 8).unwrap(), 4, "at most the function's vectors");
        irq.set(0, 2, true, || "c0".into());
        irq.set(0, 2, true, || "c0".into()); // still requesting: no new edge
        irq.set(0, 2, false, || "c0".into());
        irq.set(0, 2, true, || "c0".into());
        assert_eq!(pending(irq.fds().unwrap()[2].as_fd()), 2);
        assert_eq!(irq.sent(), vec![0, 0, 2, 0]);
        irq.set(1, 9, true, || "c1".into());
        assert!(irq.violations()[0].contains("MSI-X vector 9"), "{:?}", irq.violations());
    }

    #[test]
    fn msi_grants_a_power_of_two_and_folds_vector_numbers() {
        let irq = SimIrq::new("t", all());
        assert_eq!(irq.route(Signal::Msi, 3).unwrap(), 4);
        irq.unroute();
        assert_eq!(irq.route(Signal::Msi, 1).unwrap(), 1);
        irq.set(3, 3, true, || "c3".into());
        assert_eq!(irq.sent(), vec![1]);
        assert!(irq.violations().is_empty());
    }

    #[test]
    fn intx_is_masked_when_it_fires_and_refires_on_unmask_while_asserted() {
        let irq = SimIrq::new("t", all());
        irq.route(Signal::Intx, 1).unwrap();
        irq.set(0, 0, true, || "c0".into());
        irq.set(1, 0, true, || "c1".into()); // masked: no second interrupt
        assert_eq!(irq.sent(), vec![1]);
        // The handler clears one cause and unmasks: the other still asserts, and fires (no storm).
        irq.set(0, 0, false, || "c0".into());
        irq.unmask();
        assert_eq!((irq.sent(), irq.violations().len()), (vec![2], 0));
        // Unmasked again with nothing cleared: a storm, flagged; still one interrupt per unmask.
        irq.unmask();
        assert_eq!(irq.sent(), vec![3]);
        assert!(irq.violations()[0].contains("INTx storm"), "{:?}", irq.violations());
        // Cleared, then unmasked: the line stays quiet.
        irq.set(1, 0, false, || "c1".into());
        irq.unmask();
        assert_eq!((irq.sent(), irq.level()), (vec![3], false));
    }

    #[test]
    fn a_cause_with_nothing_routed_is_a_missed_interrupt() {
        let irq = SimIrq::new("t", Offers { msix: 0, msi: 0, intx: true });
        irq.set(0, 0, true, || "H2C channel 0 raised its interrupt".into());
        assert!(irq.violations()[0].contains("nothing services interrupts"));
        assert!(irq.route(Signal::MsiX, 1).unwrap_err().to_string().contains("no MSI-X"));
        // INTx routed later with the level still up: it fires at once.
        irq.route(Signal::Intx, 1).unwrap();
        assert_eq!(irq.sent(), vec![1]);
        assert!(irq.route(Signal::Intx, 1).is_err(), "one routing at a time");
    }
}
