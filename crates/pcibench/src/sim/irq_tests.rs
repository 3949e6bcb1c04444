use super::*;

use std::os::fd::{AsFd, BorrowedFd};

fn pending(fd: BorrowedFd<'_>) -> u64 {
    let mut v = [0u8; 8];
    rustix::io::read(fd, &mut v).map_or(0, |_| u64::from_ne_bytes(v))
}

/// 4 MSI-X entries (table at 0x8000, PBA at 0x8fe0, as XDMA places them), 4 MSI, INTx.
fn all() -> Offers {
    Offers { msix: 4, msi: 4, intx: true, pin: 1, intx_maskable: true, msix_table: 0x8000, msix_pba: 0x8fe0 }
}

/// Route `n` vectors of `kind` and enable it at the function as vfio-pci would: MSI-X with its
/// first `n` entries unmasked, MSI with `n` vectors, INTx as it is.
fn routed(kind: Signal, n: u32) -> SimIrq {
    let irq = SimIrq::new("t", all());
    let n = irq.route(kind, n).unwrap();
    let ctl = match kind {
        Signal::MsiX => Control { msix_enabled: true, ..Control::default() },
        Signal::Msi => Control { msi_enabled: true, msi_vectors: n, ..Control::default() },
        Signal::Intx => Control::default(),
    };
    irq.set_control(ctl);
    if kind == Signal::MsiX {
        for v in 0..n as u64 {
            assert!(irq.table_write(0x8000 + 16 * v + 12, 4, 0));
        }
    }
    irq
}

#[test]
fn msix_sends_one_message_per_rising_request_on_its_vector() {
    let irq = routed(Signal::MsiX, 8);
    assert_eq!(irq.sent().len(), 4, "at most the function's vectors");
    irq.set(0, 2, true, || "c0".into());
    irq.set(0, 2, true, || "c0".into()); // still requesting: no new edge
    irq.set(0, 2, false, || "c0".into());
    irq.set(0, 2, true, || "c0".into());
    assert_eq!(pending(irq.fds().unwrap()[2].as_fd()), 2);
    assert_eq!(irq.sent(), vec![0, 0, 2, 0]);
    irq.set(1, 9, true, || "c1".into());
    assert!(irq.violations()[0].contains("MSI-X vector 9, but the table has 4 entries"), "{:?}", irq.violations());
}

#[test]
fn a_masked_msix_entry_holds_its_message_in_the_pba_until_unmasked() {
    let irq = SimIrq::new("t", all());
    irq.route(Signal::MsiX, 2).unwrap();
    // Reset state: every entry masked (§6.8.2.9); the table reads back what was written.
    assert_eq!(irq.table_read(0x8000 + 12, 4), Some(1));
    assert!(irq.table_write(0x8010, 4, 0xfee0_0003));
    assert!(irq.table_write(0x8018, 4, 0x41));
    assert_eq!((irq.table_read(0x8010, 4), irq.table_read(0x8018, 4)), (Some(0xfee0_0000), Some(0x41)));
    assert_eq!(irq.table_read(0x7ffc, 4), None, "below the table: the model's register");
    irq.set_control(Control { msix_enabled: true, ..Control::default() });
    irq.set(0, 1, true, || "c0".into());
    assert!(irq.pending(1) && irq.sent() == vec![0, 0]);
    assert_eq!(irq.table_read(0x8fe0, 8), Some(0b10), "the PBA shows it");
    assert!(irq.table_write(0x8fe0, 4, 0), "the PBA is read-only");
    assert!(irq.pending(1));
    // Unmasking the entry sends it, once; the PBA bit clears.
    irq.table_write(0x801c, 4, 0);
    assert_eq!((irq.sent(), irq.pending(1)), (vec![0, 1], false));
    // The Function Mask holds every entry's message the same way, and lifting it sends them.
    irq.set_control(Control { msix_enabled: true, msix_masked: true, ..Control::default() });
    irq.set(0, 1, false, || "c0".into());
    irq.set(0, 1, true, || "c0".into());
    assert!(irq.pending(1));
    irq.set_control(Control { msix_enabled: true, ..Control::default() });
    assert_eq!((irq.sent(), irq.pending(1)), (vec![0, 2], false));
    assert!(irq.violations().is_empty(), "{:?}", irq.violations());
}

#[test]
fn the_enables_decide_how_the_function_signals() {
    let irq = SimIrq::new("t", all());
    irq.route(Signal::MsiX, 4).unwrap();
    // MSI-X routed but not enabled at the function: it asserts INTx, which nothing services.
    assert_eq!(irq.signals(), Some(Signal::Intx));
    irq.set(0, 0, true, || "c0".into());
    assert!(irq.violations()[0].contains("on INTx, but MSI-X is routed"), "{:?}", irq.violations());
    irq.set(0, 0, false, || "c0".into());
    // Interrupt Disable: no kind at all; a level is held (the Interrupt Status bit) unflagged.
    irq.set_control(Control { intx_disabled: true, ..Control::default() });
    assert_eq!(irq.signals(), None);
    irq.set(1, 0, true, || "c1".into());
    assert!(irq.level() && irq.violations().len() == 1);
    // MSI enabled wins over INTx; MSI-X over MSI.
    irq.set_control(Control { msi_enabled: true, msi_vectors: 1, ..Control::default() });
    assert_eq!(irq.signals(), Some(Signal::Msi));
    irq.set_control(Control { msi_enabled: true, msi_vectors: 1, msix_enabled: true, ..Control::default() });
    assert_eq!(irq.signals(), Some(Signal::MsiX));
    // A card with no pin and MSI-X disabled: a raised cause goes nowhere, flagged.
    let q = SimIrq::new("q", Offers { intx: false, ..all() });
    q.set(0, 0, true, || "queue 0".into());
    assert!(q.violations()[0].contains("MSI-X is not enabled, and there is no INTx pin"), "{:?}", q.violations());
}

#[test]
fn msi_grants_a_power_of_two_and_folds_vector_numbers() {
    let irq = SimIrq::new("t", all());
    assert_eq!(irq.route(Signal::Msi, 3).unwrap(), 4);
    irq.unroute();
    let irq = routed(Signal::Msi, 1);
    irq.set(3, 3, true, || "c3".into());
    assert_eq!(irq.sent(), vec![1]);
    assert!(irq.violations().is_empty());
}

#[test]
fn intx_is_masked_when_it_fires_and_refires_on_unmask_while_asserted() {
    let irq = routed(Signal::Intx, 1);
    irq.set(0, 0, true, || "c0".into());
    irq.set(1, 0, true, || "c1".into()); // masked: no second interrupt
    assert_eq!(irq.sent(), vec![1]);
    // The handler clears one cause and unmasks: the other still asserts, and fires (no storm).
    irq.set(0, 0, false, || "c0".into());
    irq.unmask();
    assert_eq!((irq.sent(), irq.violations().len()), (vec![2], 0));
    // Unmasked again with nothing cleared: it fires again (vfio-pci's re-send); once more with still nothing
    // cleared is a storm, flagged; still one interrupt per unmask.
    irq.unmask();
    assert_eq!((irq.sent(), irq.violations().len()), (vec![3], 0));
    irq.unmask();
    assert_eq!(irq.sent(), vec![4]);
    assert!(irq.violations()[0].contains("INTx storm"), "{:?}", irq.violations());
    // Cleared, then unmasked: the line stays quiet.
    irq.set(1, 0, false, || "c1".into());
    irq.unmask();
    assert_eq!((irq.sent(), irq.level()), (vec![4], false));
}

/// umem.c's handler (`mm_interrupt`) reads DMA_STATUS_CTRL before it clears the completion bits; QEMU without
/// KVM takes the guest's first BAR access after an INTx for its end of interrupt and unmasks then (hw/vfio/pci.c
/// `vfio_intx_eoi`), so the line is unmasked once with its cause still set, and vfio-pci re-sends it
/// (`vfio_pci_intx_unmask_handler`: "A pending interrupt here would immediately trigger"). The handler clears
/// the cause right after: no storm. The model called every such unmask a storm, and flagged the lab's umem run
/// (issue 49) thousands of times.
#[test]
fn an_intx_unmasked_once_before_its_handler_clears_the_cause_refires_without_a_storm() {
    let irq = routed(Signal::Intx, 1);
    for n in 1..=3u64 {
        irq.set(0, 0, true, || "chain complete".into());
        // QEMU's early end of interrupt: unmasked before the handler's write.
        irq.unmask();
        // The handler clears the cause; the re-sent interrupt finds nothing; its end unmasks a quiet line.
        irq.set(0, 0, false, || "chain complete".into());
        irq.unmask();
        assert_eq!(irq.sent(), vec![2 * n], "the interrupt and the one re-sent at the early unmask");
    }
    assert!(irq.violations().is_empty(), "{:?}", irq.violations());
}

#[test]
fn a_cause_with_nothing_routed_is_a_missed_interrupt() {
    let irq = SimIrq::new("t", Offers::LEGACY_INTX);
    irq.set(0, 0, true, || "H2C channel 0 raised its interrupt".into());
    assert!(irq.violations()[0].contains("nothing services interrupts"));
    assert!(irq.route(Signal::MsiX, 1).unwrap_err().to_string().contains("no MSI-X"));
    // INTx routed later with the level still up: it fires at once.
    irq.route(Signal::Intx, 1).unwrap();
    assert_eq!(irq.sent(), vec![1]);
    assert!(irq.route(Signal::Intx, 1).is_err(), "one routing at a time");
}

/// In a staged pass (serve's clock thread, `sim::stage`) a message waits for the writes before
/// it: kept, in order, and sent only when the pass's operations are.
#[test]
fn a_message_in_a_staged_pass_is_kept_until_the_pass_sends_it() {
    let irq = routed(Signal::MsiX, 2);
    crate::sim::stage::begin(Vec::new());
    irq.message(1, || "queue 0".into());
    assert_eq!(pending(irq.fds().unwrap()[1].as_fd()), 0, "not sent inside the pass");
    let ops = crate::sim::stage::end();
    assert_eq!(ops, [crate::sim::stage::Op::Message(1, "queue 0".into())]);
    for op in ops {
        if let crate::sim::stage::Op::Message(v, what) = op {
            irq.message(v, || what);
        }
    }
    assert_eq!(pending(irq.fds().unwrap()[1].as_fd()), 1);
    assert_eq!(irq.sent(), vec![0, 1]);
}
