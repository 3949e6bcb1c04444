//! Just enough rtnetlink to list a network namespace's interfaces and addresses: one RTM_GETLINK
//! and one RTM_GETADDR dump (NLM_F_DUMP) on a NETLINK_ROUTE socket made in that namespace. The wire
//! format is include/uapi/linux/netlink.h (nlmsghdr, 4-byte alignment), rtnetlink.h (rtattr),
//! if_link.h (ifinfomsg, IFLA_*) and if_addr.h (ifaddrmsg, IFA_*).
//!
//! Bounded: a receive timeout, a cap on messages, and a dump that does not end is an error, never a
//! hang.

use rustix::fd::{AsRawFd, FromRawFd, OwnedFd};
use serde::{Deserialize, Serialize};
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr};

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
/// Messages read per dump at most (a namespace with 65,536 interfaces is past any real one).
const MAX_MESSAGES: usize = 1 << 17;

/// A NETLINK_ROUTE socket in the calling thread's network namespace, with a receive timeout.
pub(super) fn socket() -> io::Result<OwnedFd> {
    // SAFETY: socket(2) with constant arguments; the descriptor is owned at once.
    let fd = unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC, libc::NETLINK_ROUTE) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd was just returned by socket(2) and is owned by nobody else.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    let tv = libc::timeval { tv_sec: 2, tv_usec: 0 };
    // SAFETY: a valid socket and a timeval of the size passed.
    let r = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&tv as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(sock)
}

/// The interfaces and addresses of the namespace `sock` was made in.
pub(super) fn view(sock: &OwnedFd) -> io::Result<NsView> {
    let mut v = NsView::default();
    // ifinfomsg (family AF_UNSPEC), then IFLA_EXT_MASK.
    let mut body = vec![0u8; IFINFOMSG_LEN];
    push_attr(&mut body, IFLA_EXT_MASK, &RTEXT_FILTER_SKIP_STATS.to_ne_bytes());
    dump(sock, RTM_GETLINK, 1, &body, |ty, payload| {
        if ty == RTM_NEWLINK {
            v.links.extend(parse_link(payload));
        }
    })?;
    dump(sock, RTM_GETADDR, 2, &[0u8; IFADDRMSG_LEN], |ty, payload| {
        if ty == RTM_NEWADDR {
            v.addrs.extend(parse_addr(payload));
        }
    })?;
    Ok(v)
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

/// Send one dump request and hand every answer's (type, payload) to `each` until NLMSG_DONE.
fn dump(sock: &OwnedFd, ty: u16, seq: u32, body: &[u8], mut each: impl FnMut(u16, &[u8])) -> io::Result<()> {
    let mut req = Vec::with_capacity(NLMSG_HDRLEN + body.len());
    req.extend_from_slice(&((NLMSG_HDRLEN + body.len()) as u32).to_ne_bytes());
    req.extend_from_slice(&ty.to_ne_bytes());
    req.extend_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    req.extend_from_slice(&seq.to_ne_bytes());
    req.extend_from_slice(&0u32.to_ne_bytes());
    req.extend_from_slice(body);
    // SAFETY: a valid socket and a buffer of the length passed; the kernel is the destination (no address).
    let n = unsafe { libc::send(sock.as_raw_fd(), req.as_ptr().cast(), req.len(), 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    // 32 KiB: more than one page of answers, as the kernel sizes its dump skbs (NLMSG_GOODSIZE).
    let mut buf = vec![0u8; 32 << 10];
    let mut seen = 0;
    loop {
        // SAFETY: a valid socket and a buffer of the length passed.
        let n = unsafe { libc::recv(sock.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the dump ended without NLMSG_DONE"));
        }
        for (mty, mseq, payload) in messages(&buf[..n as usize]) {
            if mseq != seq {
                continue;
            }
            seen += 1;
            if seen > MAX_MESSAGES {
                return Err(io::Error::other("the dump did not end"));
            }
            match mty {
                NLMSG_DONE => return Ok(()),
                NLMSG_ERROR => {
                    let code = payload.get(..4).map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]])).unwrap_or(0);
                    if code == 0 {
                        return Ok(());
                    }
                    return Err(io::Error::from_raw_os_error(-code));
                }
                _ => each(mty, payload),
            }
        }
    }
}

/// The messages of one datagram as (type, sequence number, payload); a truncated one ends it.
fn messages(mut b: &[u8]) -> Vec<(u16, u32, &[u8])> {
    let mut out = Vec::new();
    while b.len() >= NLMSG_HDRLEN {
        let len = u32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as usize;
        if len < NLMSG_HDRLEN || len > b.len() {
            break;
        }
        let ty = u16::from_ne_bytes([b[4], b[5]]);
        let seq = u32::from_ne_bytes([b[8], b[9], b[10], b[11]]);
        out.push((ty, seq, &b[NLMSG_HDRLEN..len]));
        b = &b[align(len).min(b.len())..];
    }
    out
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
mod tests {
    use super::*;

    fn link_msg(index: i32, flags: u32, attrs_: &[(u16, &[u8])]) -> Vec<u8> {
        let mut p = vec![0u8; IFINFOMSG_LEN];
        p[4..8].copy_from_slice(&index.to_ne_bytes());
        p[8..12].copy_from_slice(&flags.to_ne_bytes());
        for (t, d) in attrs_ {
            push_attr(&mut p, *t, d);
        }
        p
    }

    #[test]
    fn a_link_answer_reads_name_flags_master_and_parent() {
        let p = link_msg(
            3,
            IFF_UP | 0x1000,
            &[
                (IFLA_IFNAME, b"eth1\0"),
                (IFLA_MASTER, &7i32.to_ne_bytes()),
                (IFLA_PARENT_DEV_NAME, b"virtio0\0"),
                (IFLA_PARENT_DEV_BUS_NAME, b"virtio\0"),
                (IFLA_LINK, &3i32.to_ne_bytes()),
            ],
        );
        let l = parse_link(&p).unwrap();
        assert_eq!(
            l,
            NsLink {
                index: 3,
                name: "eth1".into(),
                up: true,
                master: Some(7),
                link: None,
                parent_bus: Some("virtio".into()),
                parent: Some("virtio0".into()),
            }
        );
        // A truncated attribute ends the list; the header alone still names the index.
        let mut cut = p.clone();
        cut.truncate(IFINFOMSG_LEN + 6);
        assert_eq!(parse_link(&cut).unwrap().name, "");
        assert_eq!(parse_link(&p[..8]), None);
    }

    #[test]
    fn an_address_answer_reads_local_global_addresses_only() {
        let v4 = |scope: u8| {
            let mut p = vec![libc::AF_INET as u8, 24, 0, scope, 2, 0, 0, 0];
            push_attr(&mut p, IFA_ADDRESS, &[10, 0, 0, 9]);
            push_attr(&mut p, IFA_LOCAL, &[10, 0, 0, 2]);
            p
        };
        assert_eq!(parse_addr(&v4(0)), Some((2, "10.0.0.2/24".into())));
        assert_eq!(parse_addr(&v4(RT_SCOPE_LINK)), None);
        let mut p6 = vec![libc::AF_INET6 as u8, 64, 0, 0, 5, 0, 0, 0];
        let a: Ipv6Addr = "fd00::2".parse().unwrap();
        push_attr(&mut p6, IFA_ADDRESS, &a.octets());
        assert_eq!(parse_addr(&p6), Some((5, "fd00::2/64".into())));
    }

    #[test]
    fn messages_split_and_stop_at_a_truncated_one() {
        let mut d = Vec::new();
        for (ty, seq) in [(RTM_NEWLINK, 1u32), (NLMSG_DONE, 1)] {
            d.extend_from_slice(&((NLMSG_HDRLEN + 4) as u32).to_ne_bytes());
            d.extend_from_slice(&ty.to_ne_bytes());
            d.extend_from_slice(&0u16.to_ne_bytes());
            d.extend_from_slice(&seq.to_ne_bytes());
            d.extend_from_slice(&[0; 8]);
        }
        let m = messages(&d);
        assert_eq!(m.iter().map(|(t, s, p)| (*t, *s, p.len())).collect::<Vec<_>>(), [(16, 1, 4), (3, 1, 4)]);
        assert_eq!(messages(&d[..30]).len(), 1);
    }

    /// The dump of this process's own namespace: every namespace has its loopback interface.
    #[test]
    fn this_namespace_lists_its_loopback() {
        let Ok(sock) = socket() else { return };
        let v = view(&sock).unwrap();
        assert!(v.links.iter().any(|l| l.name == "lo" && l.index > 0), "{v:?}");
    }
}
