//! Routing against a fake backend that keeps the eventfds it was given, signals them as the kernel
//! would, and models vfio-pci's INTx automask (vfio_intx_handler masks the line when it fires;
//! only ACTION_UNMASK re-enables it, and a level still asserted then fires again).

use super::*;
use std::sync::Mutex;

#[derive(Default)]
struct Line {
    asserted: bool,
    masked: bool,
}

#[derive(Default)]
struct Fake {
    /// The eventfds routed per index, duplicated as the kernel holds them (eventfd_ctx_fdget).
    routed: Mutex<Vec<(u32, Vec<OwnedFd>)>>,
    calls: Mutex<Vec<String>>,
    intx: Mutex<Line>,
    /// Refuse MSI with more than one vector, as x86 without interrupt remapping does.
    single_msi: bool,
}

impl Fake {
    fn signal(&self, index: u32, vector: usize) {
        let r = self.routed.lock().unwrap();
        let (_, fds) = r.iter().find(|(i, _)| *i == index).expect("routed");
        assert_eq!(rustix::io::write(&fds[vector], &1u64.to_ne_bytes()).unwrap(), 8);
    }
    /// The device asserts (or keeps asserting) INTx: it fires unless the line is masked.
    fn assert_intx(&self) {
        let mut l = self.intx.lock().unwrap();
        l.asserted = true;
        if !l.masked {
            l.masked = true;
            drop(l);
            self.signal(INTX_INDEX, 0);
        }
    }
    fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }
}

impl IrqBackend for Fake {
    fn trigger(&self, index: u32, fds: &[BorrowedFd<'_>]) -> Result<()> {
        self.calls.lock().unwrap().push(format!("trigger {index} x{}", fds.len()));
        if self.single_msi && index == MSI_INDEX && fds.len() > 1 {
            return Err(Error::Device("VFIO_DEVICE_SET_IRQS: Invalid argument".into()));
        }
        let owned = fds.iter().map(|f| f.try_clone_to_owned().unwrap()).collect();
        self.routed.lock().unwrap().push((index, owned));
        Ok(())
    }
    fn disable(&self, index: u32) -> Result<()> {
        self.calls.lock().unwrap().push(format!("disable {index}"));
        self.routed.lock().unwrap().retain(|(i, _)| *i != index);
        Ok(())
    }
    fn unmask(&self, index: u32) -> Result<()> {
        self.calls.lock().unwrap().push(format!("unmask {index}"));
        let mut l = self.intx.lock().unwrap();
        l.masked = false;
        if l.asserted {
            l.masked = true;
            drop(l);
            self.signal(INTX_INDEX, 0);
        }
        Ok(())
    }
    fn via(&self) -> &'static str {
        "fake eventfd"
    }
    fn device(&self) -> String {
        "fake device".into()
    }
}

const ALL: Offered = Offered { intx: 1, msi: 4, msix: 16 };

#[test]
fn auto_picks_msix_then_msi_then_intx_and_clamps_the_vectors() {
    let pick = |req, o| choose(req, o, "dev").unwrap();
    assert_eq!(pick(IrqRequest::any(4), ALL), (IrqKind::MsiX, 4));
    assert_eq!(pick(IrqRequest::any(64), ALL), (IrqKind::MsiX, 16));
    assert_eq!(pick(IrqRequest::any(0), ALL), (IrqKind::MsiX, 1), "at least one vector");
    assert_eq!(pick(IrqRequest::any(8), Offered { msix: 0, ..ALL }), (IrqKind::Msi, 4));
    assert_eq!(pick(IrqRequest::any(8), Offered { intx: 1, ..Default::default() }), (IrqKind::Intx, 1));
    assert_eq!(pick(IrqRequest::only(IrqKind::Intx, 8), ALL), (IrqKind::Intx, 1));
    let e = choose(IrqRequest::only(IrqKind::Intx, 1), Offered { intx: 0, ..ALL }, "dev").unwrap_err().to_string();
    assert!(e.contains("offers no INTx") && e.contains("MSI-X, MSI") && !e.contains('\n'), "{e}");
    let e = choose(IrqRequest::any(1), Offered::default(), "dev").unwrap_err().to_string();
    assert!(e.contains("no interrupts at all"), "{e}");
}

#[test]
fn every_vector_is_waited_on_together_and_counted_apart() {
    let fake = Arc::new(Fake::default());
    let irq = route(fake.clone(), IrqKind::MsiX, 3).unwrap();
    assert_eq!((irq.kind(), irq.vectors()), (IrqKind::MsiX, 3));
    assert_eq!(irq.describe(), "MSI-X vectors 0-2 (fake eventfd)");
    assert!(irq.wait(Duration::ZERO).unwrap().is_empty(), "nothing pending");
    fake.signal(MSIX_INDEX, 2);
    fake.signal(MSIX_INDEX, 2);
    fake.signal(MSIX_INDEX, 0);
    // Signalled before the wait, so it returns at once however long the timeout.
    let f = irq.wait(Duration::from_secs(3600)).unwrap();
    assert_eq!(f.counts(), &[1, 0, 2]);
    assert!(irq.wait(Duration::ZERO).unwrap().is_empty(), "each signal is reported once");
    irq.unmask().unwrap();
    drop(irq);
    assert_eq!(fake.calls(), ["trigger 2 x3", "disable 2"], "MSI-X unmasks nothing; drop tears down");
    assert!(fake.routed.lock().unwrap().is_empty());
}

#[test]
fn many_vectors_ready_at_once_are_all_read() {
    let fake = Arc::new(Fake::default());
    let irq = route(fake.clone(), IrqKind::MsiX, 100).unwrap();
    for v in 0..100 {
        fake.signal(MSIX_INDEX, v);
    }
    let f = irq.wait(Duration::from_secs(3600)).unwrap();
    assert_eq!((f.total(), f.vectors().count()), (100, 100));
}

#[test]
fn msi_falls_back_to_one_vector_where_several_are_refused() {
    let fake = Arc::new(Fake { single_msi: true, ..Default::default() });
    let irq = route(fake.clone(), IrqKind::Msi, 4).unwrap();
    assert_eq!(irq.vectors(), 1);
    assert_eq!(fake.calls(), ["trigger 1 x4", "trigger 1 x1"]);
    assert_eq!(irq.describe(), "MSI vector 0 (fake eventfd)");
}

/// A level interrupt whose cause is not cleared fires once, not in a storm: the line stays masked
/// until the handler unmasks it, and fires again then only if the device still asserts it.
#[test]
fn intx_fires_once_per_unmask_so_a_level_never_storms() {
    let fake = Arc::new(Fake::default());
    let irq = route(fake.clone(), IrqKind::Intx, 4).unwrap();
    assert_eq!(irq.vectors(), 1, "INTx is one line");
    drop(irq);
    let irq = route(fake.clone(), IrqKind::Intx, 1).unwrap();
    fake.assert_intx();
    fake.assert_intx();
    fake.assert_intx();
    assert_eq!(irq.wait(Duration::from_secs(3600)).unwrap().total(), 1, "masked after the first");
    assert!(irq.wait(Duration::ZERO).unwrap().is_empty());
    // Handler forgot to clear the cause: the unmask lets it fire once more, and only once.
    irq.unmask().unwrap();
    assert_eq!(irq.wait(Duration::from_secs(3600)).unwrap().total(), 1);
    // The cause cleared, then unmasked: silence.
    fake.intx.lock().unwrap().asserted = false;
    irq.unmask().unwrap();
    assert!(irq.wait(Duration::ZERO).unwrap().is_empty());
    assert_eq!(irq.describe(), "INTx (fake eventfd, unmasked after each)");
    drop(irq);
    let c = fake.calls();
    assert_eq!(&c[2..], ["trigger 0 x1", "unmask 0", "unmask 0", "disable 0"]);
}
