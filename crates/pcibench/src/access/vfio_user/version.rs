//! VFIO_USER_VERSION as both peers negotiate it (vfio-user.rst "VFIO_USER_VERSION"): the major
//! must match, the reply's minor is at most the proposed one, and the reply's capabilities are a
//! subset of those proposed. A capability left out takes the spec's default: `max_msg_fds` 1,
//! `max_data_xfer_size` 1 MiB, `pgsizes` 4 KiB.

use super::wire;
use serde_json::{json, Map, Value};

/// The protocol version pcibench speaks (major 0). QEMU's client proposes minor 0
/// (hw/vfio-user/protocol.h VFIO_USER_MINOR_VER), libvfio-user minor 2 (LIB_VFIO_USER_MINOR);
/// pcibench proposes and serves up to 1.
pub const MAJOR: u16 = 0;
pub const MINOR: u16 = 1;

/// The capabilities one side announced, with the spec's defaults for those it left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps {
    /// Descriptors the sender accepts on one message (default 1).
    pub max_msg_fds: u32,
    /// The most data one region or DMA read/write message may carry (default 1 MiB).
    pub max_data: usize,
}

impl Default for Caps {
    fn default() -> Caps {
        Caps { max_msg_fds: 1, max_data: wire::MAX_DATA }
    }
}

impl Caps {
    /// From a VERSION message's JSON (`{"capabilities": {...}}`); a field of the wrong type is
    /// malformed, one out of range is clipped to what this side accepts.
    pub fn parse(v: &Value) -> Result<Caps, String> {
        let mut caps = Caps::default();
        let c = match v.get("capabilities") {
            None | Some(Value::Null) => return Ok(caps),
            Some(Value::Object(c)) => c,
            Some(_) => return Err("its capabilities are not a JSON object".into()),
        };
        let number = |k: &str| match c.get(k) {
            None => Ok(None),
            Some(x) => x.as_u64().map(Some).ok_or_else(|| format!("its {k} is not a number")),
        };
        if let Some(n) = number("max_msg_fds")? {
            caps.max_msg_fds = n.min(wire::MAX_FDS as u64) as u32;
        }
        if let Some(n) = number("max_data_xfer_size")? {
            caps.max_data = n.clamp(8, wire::MAX_DATA as u64) as usize;
        }
        Ok(caps)
    }
}

/// What pcibench's client proposes: the capabilities it accepts (wire.rs bounds), and an empty
/// `pcibench` object, which asks a `pcibench serve` to say what it serves (a name, never
/// trusted by itself: see `info`).
pub fn client_proposal() -> Value {
    json!({
        "capabilities": { "max_msg_fds": wire::MAX_FDS, "max_data_xfer_size": wire::MAX_DATA, "pgsizes": 4096 },
        "pcibench": {},
    })
}

/// The server's reply to a proposal of `minor` with `proposed` capabilities: the lower minor,
/// and of what this server supports only what was proposed (vfio-user.rst: "The capability list
/// must be a subset of those proposed"). `extension` is added under `pcibench` only when the
/// client proposed that key too.
pub fn server_reply(minor: u16, proposed: &Value, extension: Value) -> (u16, Value) {
    let offered = json!({ "max_msg_fds": wire::MAX_FDS, "max_data_xfer_size": wire::MAX_DATA, "pgsizes": 4096 });
    let mut caps = Map::new();
    if let (Some(p), Some(o)) = (proposed.get("capabilities").and_then(Value::as_object), offered.as_object()) {
        for (k, v) in o {
            if p.contains_key(k) {
                caps.insert(k.clone(), v.clone());
            }
        }
    }
    let mut reply = Map::new();
    reply.insert("capabilities".into(), Value::Object(caps));
    if proposed.get("pcibench").is_some() && !extension.is_null() {
        reply.insert("pcibench".into(), extension);
    }
    (minor.min(MINOR), Value::Object(reply))
}

/// Where DMA_READ and DMA_WRITE put their fields: the spec's layout, a 64-bit address and a 64-bit
/// count, the data at byte 16, for every peer. libvfio-user (`struct vfio_user_dma_region_access`,
/// packed) has it, and so has QEMU 11.1.3 on the wire at minor 0, whatever its source's struct
/// `VFIOUserDMARW` (a 32-bit count and a flexible array after it) reads like: its reply to a
/// DMA_READ of 32 bytes, captured in the lab (q35-vu-noiommu), is the address, the count, four zero
/// bytes and the data from byte 16 (the test below holds those bytes). A layout with the data at
/// byte 12 fed the served XDMA model `00000000 13004bad ...` for its descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DmaLayout {
    Spec,
}

impl DmaLayout {
    pub fn for_minor(_minor: u16) -> DmaLayout {
        DmaLayout::Spec
    }

    /// Bytes before the data.
    pub fn data_at(self) -> usize {
        16
    }

    /// A DMA_READ or DMA_WRITE request's preamble (and a DMA_READ reply's, before its data).
    pub fn preamble(self, address: u64, count: u64) -> wire::Put {
        wire::Put::default().u64(address).u64(count)
    }

    /// The address and count at the start of a DMA message's payload.
    pub fn parse(self, payload: &[u8]) -> Result<(u64, u64), wire::WireError> {
        let mut f = wire::Fields::new(payload, "a DMA message");
        Ok((f.u64()?, f.u64()?))
    }

    /// The payload of a DMA_WRITE carrying `data`, or of a DMA_READ reply.
    pub fn with_data(self, address: u64, data: &[u8]) -> Vec<u8> {
        self.preamble(address, data.len() as u64).bytes(data).0
    }

    /// A DMA_READ request: the address and the count.
    pub fn read_request(self, address: u64, count: u64) -> Vec<u8> {
        self.preamble(address, count).0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What QEMU 11.1 proposes (proxy.c caps_json): minor 0 and a capability set with migration
    /// and write_multiple, which pcibench does not offer.
    fn qemu() -> Value {
        json!({"capabilities":{"migration":{"pgsize":4096,"max_bitmap_size":268435456},"max_msg_fds":16,
               "max_data_xfer_size":1048576,"pgsizes":4096,"max_dma_maps":65535,"write_multiple":true}})
    }

    #[test]
    fn the_reply_is_at_most_the_proposed_minor_and_a_subset_of_the_proposed_capabilities() {
        let (minor, caps) = server_reply(0, &qemu(), json!({"card": "sim"}));
        assert_eq!(minor, 0, "QEMU refuses a minor above the one it proposed (vfio_user_validate_version)");
        let c = caps["capabilities"].as_object().unwrap();
        let mut keys: Vec<&str> = c.keys().map(String::as_str).collect();
        keys.sort();
        assert_eq!(keys, ["max_data_xfer_size", "max_msg_fds", "pgsizes"]);
        assert!(
            caps.get("pcibench").is_none(),
            "QEMU proposed no pcibench key: none comes back (no spurious capability)"
        );
        // A client that proposed nothing gets nothing; ours gets the extension.
        let (minor, caps) = server_reply(7, &json!({}), Value::Null);
        assert_eq!((minor, caps), (MINOR, json!({"capabilities": {}})));
        let (_, caps) = server_reply(1, &client_proposal(), json!({"card": "sim"}));
        assert_eq!(caps["pcibench"]["card"], "sim");
        assert!(caps["capabilities"].get("pgsizes").is_some());
    }

    #[test]
    fn absent_capabilities_take_the_spec_s_defaults() {
        assert_eq!(Caps::parse(&json!({})).unwrap(), Caps { max_msg_fds: 1, max_data: 1 << 20 });
        assert_eq!(Caps::parse(&json!({"capabilities":{"max_msg_fds":16}})).unwrap().max_msg_fds, 8);
        assert!(Caps::parse(&json!({"capabilities":{"max_msg_fds":"x"}})).is_err());
        assert!(Caps::parse(&json!({"capabilities":[1]})).is_err());
    }

    #[test]
    fn dma_messages_in_the_specs_layout_as_qemu_11_1_answers_them() {
        let q = DmaLayout::for_minor(0);
        assert_eq!(q, DmaLayout::Spec, "QEMU proposes minor 0 and answers in the spec's layout");
        // QEMU 11.1.3's reply payload to a DMA_READ of the 32-byte XDMA descriptor at 0x5a00000
        // (control 0xad4b0013, length 0x1000, source 0x5600000), as serve received it in the lab.
        let mut reply = vec![0x00, 0x00, 0xa0, 0x05, 0, 0, 0, 0, 0x20, 0, 0, 0, 0, 0, 0, 0];
        reply.extend_from_slice(&[0x13, 0x00, 0x4b, 0xad, 0x00, 0x10, 0, 0, 0, 0, 0x60, 0x05]);
        reply.resize(48, 0);
        assert_eq!(q.parse(&reply).unwrap(), (0x5a0_0000, 32));
        assert_eq!(&reply[q.data_at()..q.data_at() + 4], &[0x13, 0x00, 0x4b, 0xad], "the descriptor's magic");
        let s = DmaLayout::for_minor(1).with_data(0x1000, &[1, 2, 3]);
        assert_eq!((s.len(), &s[16..]), (19, &[1u8, 2, 3][..]));
        assert_eq!(q.parse(&s).unwrap(), (0x1000, 3));
        assert_eq!(q.read_request(8, 4), q.preamble(8, 4).0);
        assert_eq!(q.read_request(8, 4).len(), 16);
    }
}
