//! Just enough rtnetlink to list a network namespace's interfaces and addresses: one RTM_GETLINK
//! and one RTM_GETADDR dump (NLM_F_DUMP) on a NETLINK_ROUTE socket made in that namespace. The wire
//! format is include/uapi/linux/netlink.h (nlmsghdr, 4-byte alignment), rtnetlink.h (rtattr),
//! if_link.h (ifinfomsg, IFLA_*) and if_addr.h (ifaddrmsg, IFA_*).
//!
//! The answers come only from the kernel. The namespaces looked into may be users' own (a user
//! namespace gives its owner CAP_NET_ADMIN in a network namespace of theirs), where any process
//! could write datagrams to this socket's port: a forged RTM_NEWLINK would show an interface up on
//! a device, an early NLMSG_DONE would hide real ones, and a flood would never end. So the socket
//! is connected to the kernel (port 0), which makes the kernel refuse every other socket's unicast
//! to it (net/netlink/af_netlink.c, netlink_getsockbyportid: ECONNREFUSED when the receiver is
//! NETLINK_CONNECTED and the sender's port is not its dst_portid); a datagram whose sender is not
//! the kernel is dropped all the same (one could land between the bind and the connect); each
//! request has a random sequence number, and only answers carrying it and this socket's port
//! (nlmsg_pid) count.
//!
//! Bounded: every datagram and message received, counted or dropped, counts against a budget of
//! messages and bytes, and each namespace has one deadline for both dumps; past either the view
//! fails (the namespace is "could not check"), never hangs.

use rustix::fd::OwnedFd;
use rustix::net::netlink::SocketAddrNetlink;
use serde::{Deserialize, Serialize};
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::{Duration, Instant};

/// One network interface of a namespace (RTM_NEWLINK, include/uapi/linux/if_link.h).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct NsLink {
    pub index: i32,
    pub name: String,
    /// IFF_UP in its flags.
    pub up: bool,
    /// IFLA_MASTER: the bond, bridge or team it is enslaved to.
    pub master: Option<i32>,
    /// IFLA_LINK: the interface it sits on (a VLAN's or macvlan's lower device).
    pub link: Option<i32>,
    /// IFLA_PARENT_DEV_BUS_NAME: the bus of the device it belongs to (`pci`, `virtio`).
    pub parent_bus: Option<String>,
    /// IFLA_PARENT_DEV_NAME: that device's name (`0000:01:00.0`, `virtio0`).
    pub parent: Option<String>,
}

/// A network namespace as netlink shows it: its interfaces and their addresses.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct NsView {
    pub links: Vec<NsLink>,
    /// (interface index, `10.0.0.2/24`): global and site addresses (link-local and host ones left out).
    pub addrs: Vec<(i32, String)>,
}

const NLMSG_HDRLEN: usize = 16;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_DUMP: u16 = 0x300;
const RTM_NEWLINK: u16 = 16;
const RTM_GETLINK: u16 = 18;
const RTM_NEWADDR: u16 = 20;
const RTM_GETADDR: u16 = 22;
/// sizeof(struct ifinfomsg), sizeof(struct ifaddrmsg).
const IFINFOMSG_LEN: usize = 16;
const IFADDRMSG_LEN: usize = 8;
const IFLA_IFNAME: u16 = 3;
const IFLA_LINK: u16 = 5;
const IFLA_MASTER: u16 = 10;
const IFLA_EXT_MASK: u16 = 29;
const IFLA_PARENT_DEV_NAME: u16 = 56;
const IFLA_PARENT_DEV_BUS_NAME: u16 = 57;
/// RTEXT_FILTER_SKIP_STATS: leave the statistics out of the dump (smaller, cheaper).
const RTEXT_FILTER_SKIP_STATS: u32 = 1 << 3;
const IFA_ADDRESS: u16 = 1;
const IFA_LOCAL: u16 = 2;
/// RT_SCOPE_LINK (include/uapi/linux/rtnetlink.h): link-local and host addresses are at or above it.
const RT_SCOPE_LINK: u8 = 253;
const IFF_UP: u32 = 0x1;
/// Messages received per namespace at most, dropped ones included (a namespace with 65,536
/// interfaces is past any real one).
const MAX_MESSAGES: usize = 1 << 17;
/// Bytes received per namespace at most, dropped datagrams included.
const MAX_BYTES: usize = 256 << 20;
/// How long both dumps of one namespace may take together.
const DEADLINE: Duration = Duration::from_secs(5);
/// 32 KiB: more than one datagram of answers, as the kernel sizes its dump skbs (NLMSG_GOODSIZE,
/// at most 32 KiB: af_netlink.c, netlink_recvmsg's max_recvmsg_len); a larger one is an error.
const DATAGRAM: usize = 32 << 10;

/// A NETLINK_ROUTE socket in the calling thread's network namespace, connected to the kernel
/// (see the module docs).
pub(super) fn socket() -> io::Result<OwnedFd> {
    use rustix::net::{socket_with, AddressFamily, SocketFlags, SocketType};
    // Protocol 0 is NETLINK_ROUTE (include/uapi/linux/netlink.h), which rustix spells as None.
    let sock = socket_with(AddressFamily::NETLINK, SocketType::RAW, SocketFlags::CLOEXEC, None)?;
    // Binds the socket to a port of the kernel's choosing first (netlink_connect's autobind).
    rustix::net::connect(&sock, &SocketAddrNetlink::new(0, 0))?;
    Ok(sock)
}

/// The interfaces and addresses of the namespace `sock` was made in.
pub(super) fn view(sock: &OwnedFd) -> io::Result<NsView> {
    let port = SocketAddrNetlink::try_from(rustix::net::getsockname(sock)?)
        .map_err(|_| io::Error::other("the netlink socket has no netlink address"))?
        .pid();
    let mut budget = Budget::new(Instant::now() + DEADLINE);
    let seq = random_seq();
    let mut v = NsView::default();
    // ifinfomsg (family AF_UNSPEC), then IFLA_EXT_MASK.
    let mut body = vec![0u8; IFINFOMSG_LEN];
    push_attr(&mut body, IFLA_EXT_MASK, &RTEXT_FILTER_SKIP_STATS.to_ne_bytes());
    dump(sock, RTM_GETLINK, Want { seq, port }, &body, &mut budget, |ty, payload| {
        if ty == RTM_NEWLINK {
            v.links.extend(parse_link(payload));
        }
    })?;
    let want = Want { seq: seq.wrapping_add(1), port };
    dump(sock, RTM_GETADDR, want, &[0u8; IFADDRMSG_LEN], &mut budget, |ty, payload| {
        if ty == RTM_NEWADDR {
            v.addrs.extend(parse_addr(payload));
        }
    })?;
    Ok(v)
}

/// A sequence number no other process can guess: a forged answer must carry it to count.
fn random_seq() -> u32 {
    let mut b = [0u8; 4];
    // SAFETY: getrandom(2) into a 4-byte stack buffer of the length passed.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    if n == 4 {
        return u32::from_ne_bytes(b);
    }
    // No getrandom (kernels before 3.17): std's per-process random hash keys.
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.finish() as u32
}

/// What answers to one request carry: its sequence number and this socket's port.
#[derive(Debug, Clone, Copy)]
struct Want {
    seq: u32,
    port: u32,
}

/// What one namespace's dumps may still receive.
#[derive(Debug)]
struct Budget {
    messages: usize,
    bytes: usize,
    deadline: Instant,
}

impl Budget {
    fn new(deadline: Instant) -> Budget {
        Budget { messages: MAX_MESSAGES, bytes: MAX_BYTES, deadline }
    }

    /// Count a datagram of `n` bytes received.
    fn datagram(&mut self, n: usize) -> io::Result<()> {
        self.bytes = self
            .bytes
            .checked_sub(n)
            .ok_or_else(|| io::Error::other(format!("the answers ran past {} MiB without ending", MAX_BYTES >> 20)))?;
        Ok(())
    }

    /// Count one message received.
    fn message(&mut self) -> io::Result<()> {
        self.messages = self
            .messages
            .checked_sub(1)
            .ok_or_else(|| io::Error::other(format!("the answers ran past {MAX_MESSAGES} messages without ending")))?;
        Ok(())
    }
}

/// Send one dump request and hand every answer's (type, payload) to `each` until NLMSG_DONE.
fn dump(
    sock: &OwnedFd,
    ty: u16,
    want: Want,
    body: &[u8],
    budget: &mut Budget,
    mut each: impl FnMut(u16, &[u8]),
) -> io::Result<()> {
    let mut req = Vec::with_capacity(NLMSG_HDRLEN + body.len());
    req.extend_from_slice(&((NLMSG_HDRLEN + body.len()) as u32).to_ne_bytes());
    req.extend_from_slice(&ty.to_ne_bytes());
    req.extend_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    req.extend_from_slice(&want.seq.to_ne_bytes());
    req.extend_from_slice(&want.port.to_ne_bytes());
    req.extend_from_slice(body);
    // Connected: the kernel is the destination.
    rustix::net::send(sock, &req, rustix::net::SendFlags::empty())?;
    let mut buf = vec![0u8; DATAGRAM];
    loop {
        wait_readable(sock, budget.deadline)?;
        let flags = rustix::net::RecvFlags::DONTWAIT | rustix::net::RecvFlags::TRUNC;
        let (n, from) = match rustix::net::recvfrom(sock, &mut buf[..], flags) {
            Ok((_, n, from)) => (n, from),
            Err(rustix::io::Errno::INTR | rustix::io::Errno::AGAIN) => continue,
            Err(e) => return Err(e.into()),
        };
        budget.datagram(n)?;
        let sender = from.and_then(|a| SocketAddrNetlink::try_from(a).ok());
        if n > buf.len() {
            if sender.is_some_and(|s| s.pid() == 0) {
                return Err(io::Error::other(format!("an answer of {n} bytes, more than the {DATAGRAM} read")));
            }
            continue;
        }
        if take(&buf[..n], sender, want, budget, &mut each)? {
            return Ok(());
        }
    }
}

/// Wait until `sock` has a datagram, or fail at `deadline`.
fn wait_readable(sock: &OwnedFd, deadline: Instant) -> io::Result<()> {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no complete answer within {} s", DEADLINE.as_secs()),
            ));
        }
        let t = Timespec { tv_sec: left.as_secs() as i64, tv_nsec: left.subsec_nanos() as i64 };
        let mut fds = [PollFd::new(sock, PollFlags::IN)];
        match poll(&mut fds, Some(&t)) {
            Ok(n) if n > 0 => return Ok(()),
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

/// One datagram of a dump: from `sender` (None: no netlink address). Only the kernel's (port 0,
/// no multicast group) count, and in them only messages with `want`'s sequence number and port;
/// every message counts against the budget all the same. True at the dump's end (NLMSG_DONE, or
/// an NLMSG_ERROR of 0); an error answer is the error.
fn take(
    datagram: &[u8],
    sender: Option<SocketAddrNetlink>,
    want: Want,
    budget: &mut Budget,
    each: &mut impl FnMut(u16, &[u8]),
) -> io::Result<bool> {
    let from_kernel = sender.is_some_and(|s| s.pid() == 0 && s.groups() == 0);
    for (mty, mseq, mpid, payload) in messages(datagram) {
        budget.message()?;
        if !from_kernel || mseq != want.seq || mpid != want.port {
            continue;
        }
        match mty {
            NLMSG_DONE => return Ok(true),
            NLMSG_ERROR => {
                let code = payload.get(..4).map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]])).unwrap_or(0);
                if code == 0 {
                    return Ok(true);
                }
                return Err(io::Error::from_raw_os_error(code.saturating_neg()));
            }
            _ => each(mty, payload),
        }
    }
    Ok(false)
}

/// The messages of one datagram as (type, sequence number, port, payload); a truncated one ends it.
fn messages(mut b: &[u8]) -> Vec<(u16, u32, u32, &[u8])> {
    let mut out = Vec::new();
    while b.len() >= NLMSG_HDRLEN {
        let len = u32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as usize;
        if len < NLMSG_HDRLEN || len > b.len() {
            break;
        }
        let ty = u16::from_ne_bytes([b[4], b[5]]);
        let seq = u32::from_ne_bytes([b[8], b[9], b[10], b[11]]);
        let pid = u32::from_ne_bytes([b[12], b[13], b[14], b[15]]);
        out.push((ty, seq, pid, &b[NLMSG_HDRLEN..len]));
        b = &b[align(len).min(b.len())..];
    }
    out
}

fn align(n: usize) -> usize {
    (n + 3) & !3
}

fn push_attr(buf: &mut Vec<u8>, ty: u16, data: &[u8]) {
    buf.extend_from_slice(&((4 + data.len()) as u16).to_ne_bytes());
    buf.extend_from_slice(&ty.to_ne_bytes());
    buf.extend_from_slice(data);
    buf.resize(align(buf.len()), 0);
}

/// The attributes after a fixed header as (type, data); a truncated one ends them.
fn attrs(mut b: &[u8]) -> Vec<(u16, &[u8])> {
    let mut out = Vec::new();
    while b.len() >= 4 {
        let len = u16::from_ne_bytes([b[0], b[1]]) as usize;
        if len < 4 || len > b.len() {
            break;
        }
        // NLA_F_NESTED and NLA_F_NET_BYTEORDER are the top bits of the type.
        out.push((u16::from_ne_bytes([b[2], b[3]]) & 0x3fff, &b[4..len]));
        b = &b[align(len).min(b.len())..];
    }
    out
}

fn text(d: &[u8]) -> String {
    let end = d.iter().position(|c| *c == 0).unwrap_or(d.len());
    String::from_utf8_lossy(&d[..end]).into_owned()
}

fn int(d: &[u8]) -> Option<i32> {
    Some(i32::from_ne_bytes(d.get(..4)?.try_into().ok()?))
}

/// One RTM_NEWLINK payload: struct ifinfomsg { family, pad, type u16, index i32, flags u32, change u32 }.
pub(super) fn parse_link(p: &[u8]) -> Option<NsLink> {
    if p.len() < IFINFOMSG_LEN {
        return None;
    }
    let index = i32::from_ne_bytes(p[4..8].try_into().ok()?);
    let flags = u32::from_ne_bytes(p[8..12].try_into().ok()?);
    let mut l = NsLink { index, up: flags & IFF_UP != 0, ..Default::default() };
    for (ty, d) in attrs(&p[IFINFOMSG_LEN..]) {
        match ty {
            IFLA_IFNAME => l.name = text(d),
            IFLA_MASTER => l.master = int(d).filter(|m| *m > 0),
            IFLA_LINK => l.link = int(d).filter(|m| *m > 0 && *m != index),
            IFLA_PARENT_DEV_NAME => l.parent = Some(text(d)),
            IFLA_PARENT_DEV_BUS_NAME => l.parent_bus = Some(text(d)),
            _ => {}
        }
    }
    Some(l)
}

/// One RTM_NEWADDR payload: struct ifaddrmsg { family, prefixlen, flags, scope, index u32 }; the
/// address is IFA_LOCAL where there is one (the other end of a point-to-point link is IFA_ADDRESS).
pub(super) fn parse_addr(p: &[u8]) -> Option<(i32, String)> {
    if p.len() < IFADDRMSG_LEN {
        return None;
    }
    let (family, plen, scope) = (p[0] as i32, p[1], p[3]);
    if scope >= RT_SCOPE_LINK {
        return None;
    }
    let index = i32::from_ne_bytes(p[4..8].try_into().ok()?);
    let mut local = None;
    let mut address = None;
    for (ty, d) in attrs(&p[IFADDRMSG_LEN..]) {
        match ty {
            IFA_LOCAL => local = Some(d),
            IFA_ADDRESS => address = Some(d),
            _ => {}
        }
    }
    let a = local.or(address)?;
    let shown = match family {
        libc::AF_INET => Ipv4Addr::from(<[u8; 4]>::try_from(a).ok()?).to_string(),
        libc::AF_INET6 => Ipv6Addr::from(<[u8; 16]>::try_from(a).ok()?).to_string(),
        _ => return None,
    };
    Some((index, format!("{shown}/{plen}")))
}

#[cfg(test)]
#[path = "netlink_tests.rs"]
mod tests;
