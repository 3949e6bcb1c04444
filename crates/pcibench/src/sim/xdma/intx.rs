//! The INTx line an XDMA interrupt asserts: with INTx, the two low bits of a channel's or user
//! interrupt's vector field name it (INTA = 0 to INTD = 3), and "the host recognizes interrupts
//! only based on these values" (PG195 "Legacy Interrupts"): an interrupt on a line other than the
//! function's pin (config byte 0x3D) reaches nobody. A rule of the model's, apart from `rules.rs`
//! because the IRQ block's state (`state.rs`) checks it.

use super::super::irq::Signal;

/// Whether the interrupt `what` names, signalled as `signals` with `vector` in its field, reaches
/// the host through the function's `pin`; Err with the model's words where it does not.
pub(super) fn line(signals: Option<Signal>, pin: u8, vector: u32, what: impl FnOnce() -> String) -> Result<(), String> {
    if signals != Some(Signal::Intx) {
        return Ok(());
    }
    let pin = u32::from(pin.clamp(1, 4));
    if vector & 3 == pin - 1 {
        return Ok(());
    }
    let name = |p: u32| ["INTA", "INTB", "INTC", "INTD"][p as usize & 3];
    Err(format!(
        "{} asserted {} (vector field {vector}), but the function's pin is {} (config byte 0x3D {pin}): the host \
         never sees it (PG195 \"Legacy Interrupts\"; libxdma.c irq_legacy_setup programs pin - 1)",
        what(),
        name(vector),
        name(pin - 1)
    ))
}
