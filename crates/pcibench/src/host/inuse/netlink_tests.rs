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
    let d = [msg(RTM_NEWLINK, 1, 7, &[0; 4]), msg(NLMSG_DONE, 1, 7, &[0; 4])].concat();
    let m = messages(&d);
    assert_eq!(
        m.iter().map(|(t, s, pid, p)| (*t, *s, *pid, p.len())).collect::<Vec<_>>(),
        [(16, 1, 7, 4), (3, 1, 7, 4)]
    );
    assert_eq!(messages(&d[..30]).len(), 1);
}

/// One netlink message: header (length, type, flags 0, sequence number, port) and payload.
fn msg(ty: u16, seq: u32, pid: u32, payload: &[u8]) -> Vec<u8> {
    let mut d = Vec::new();
    d.extend_from_slice(&((NLMSG_HDRLEN + payload.len()) as u32).to_ne_bytes());
    d.extend_from_slice(&ty.to_ne_bytes());
    d.extend_from_slice(&0u16.to_ne_bytes());
    d.extend_from_slice(&seq.to_ne_bytes());
    d.extend_from_slice(&pid.to_ne_bytes());
    d.extend_from_slice(payload);
    d.resize(align(d.len()), 0);
    d
}

/// A forged interface, up, on a PCI device.
fn forged_link() -> Vec<u8> {
    link_msg(
        99,
        IFF_UP,
        &[(IFLA_IFNAME, b"forged0\0"), (IFLA_PARENT_DEV_BUS_NAME, b"pci\0"), (IFLA_PARENT_DEV_NAME, b"0000:00:03.0\0")],
    )
}

/// S4 (issue 51): of a dump's datagrams only the kernel's count (port 0, no group), and in them
/// only the messages with the request's sequence number and this socket's port; an early DONE
/// or a forged interface from anyone else changes nothing.
#[test]
fn only_the_kernel_s_answers_to_this_request_count() {
    let want = Want { seq: 0x5eed_1234, port: 4242 };
    let kernel = Some(SocketAddrNetlink::new(0, 0));
    let mut budget = Budget::new(Instant::now() + DEADLINE);
    let mut links = Vec::new();
    let mut each = |ty: u16, p: &[u8]| {
        if ty == RTM_NEWLINK {
            links.extend(parse_link(p));
        }
    };
    let link = forged_link();
    for (sender, seq, pid) in [
        (Some(SocketAddrNetlink::new(31337, 0)), want.seq, want.port), // another socket's
        (Some(SocketAddrNetlink::new(0, 1)), want.seq, want.port),     // a multicast group's
        (None, want.seq, want.port),                                   // no netlink address
        (kernel, want.seq ^ 1, want.port),                             // another request's
        (kernel, want.seq, want.port + 1),                             // another socket's request
    ] {
        let d = [msg(RTM_NEWLINK, seq, pid, &link), msg(NLMSG_DONE, seq, pid, &[0; 4])].concat();
        assert!(!take(&d, sender, want, &mut budget, &mut each).unwrap(), "{sender:?} {seq:#x} {pid}: done");
    }
    assert_eq!(budget.messages, MAX_MESSAGES - 10, "every message counted, dropped or not");
    let d = [msg(RTM_NEWLINK, want.seq, want.port, &link), msg(NLMSG_DONE, want.seq, want.port, &[0; 4])].concat();
    assert!(take(&d, kernel, want, &mut budget, &mut each).unwrap());
    // The kernel's error answer is the dump's error.
    let error = msg(NLMSG_ERROR, want.seq, want.port, &(-libc::EPERM).to_ne_bytes());
    let e = take(&error, kernel, want, &mut budget, &mut each);
    assert_eq!(e.unwrap_err().raw_os_error(), Some(libc::EPERM));
    assert_eq!(links.iter().map(|l| l.name.as_str()).collect::<Vec<_>>(), ["forged0"], "the kernel's own answer");
}

/// A flood (messages that never end the dump, from anyone) is cut off by the message budget, and
/// bytes by the byte budget; a namespace that does not answer by its deadline fails at once.
#[test]
fn a_flood_is_bounded() {
    let want = Want { seq: 9, port: 4242 };
    let mut budget = Budget::new(Instant::now() + DEADLINE);
    let d: Vec<u8> = (0..64).flat_map(|i| msg(RTM_NEWLINK, i, want.port, &[0; 16])).collect();
    let mut datagrams = 0usize;
    let e = loop {
        match take(&d, Some(SocketAddrNetlink::new(0, 0)), want, &mut budget, &mut |_, _| {}) {
            Ok(false) => datagrams += 1,
            Ok(true) => panic!("a flood ended the dump"),
            Err(e) => break e,
        }
    };
    assert_eq!(datagrams, MAX_MESSAGES / 64, "cut off at the message budget");
    assert!(e.to_string().contains("ran past 131072 messages"), "{e}");
    let mut budget = Budget::new(Instant::now() + DEADLINE);
    let mut total = 0usize;
    let e = loop {
        match budget.datagram(DATAGRAM) {
            Ok(()) => total += DATAGRAM,
            Err(e) => break e,
        }
    };
    assert_eq!(total, MAX_BYTES);
    assert!(e.to_string().contains("ran past 256 MiB"), "{e}");
    // Nothing asked, nothing pending: the deadline (already past) ends the wait, no blocking.
    let Ok(sock) = socket() else { return };
    let e = wait_readable(&sock, Instant::now()).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
}

/// The dump of this process's own namespace: every namespace has its loopback interface.
#[test]
fn this_namespace_lists_its_loopback() {
    let Ok(sock) = socket() else { return };
    let v = view(&sock).unwrap();
    assert!(v.links.iter().any(|l| l.name == "lo" && l.index > 0), "{v:?}");
}

/// What the forger's sends came to: (delivered, refused with ECONNREFUSED, failed otherwise).
type Sends = [u32; 3];

/// How many forged datagrams the flood sends.
const FLOOD: u32 = 20_000;

/// S4 (issue 51), live: a process in a user and network namespace of its own (made as nobody
/// where the kernel lets users make one, else as root: the kernel's unicast rule is the same)
/// writes forged answers to the port of the socket pcibench made in that namespace: an
/// interface up on a PCI device for the sequence numbers a fixed scheme would use, an early
/// NLMSG_DONE, and a flood. The kernel refuses every one of them (the socket is connected), and
/// the view is the namespace's own: its loopback, down, and nothing else. Needs root (setns into
/// the namespace); says so on stderr otherwise.
#[test]
fn forged_answers_from_a_user_s_own_namespace_change_nothing() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("netlink: not root: the namespace forgery test did not run (setns needs root)");
        return;
    }
    for as_nobody in [true, false] {
        let Some((sock, sends)) = forge_in_own_namespace(as_nobody) else {
            eprintln!("netlink: no user namespace for nobody here: the forger runs as root in its own");
            continue;
        };
        assert_eq!(sends, [0, 2 * 4 + FLOOD, 0], "(delivered, refused, failed): the kernel refuses all");
        // Everything the forger sent was queued (or refused) before the dumps ask: a forged
        // answer that had got through would be read first.
        let view = view(&sock).unwrap();
        assert_eq!(view.links.iter().map(|l| (l.name.as_str(), l.up)).collect::<Vec<_>>(), [("lo", false)], "{view:?}");
        assert!(view.addrs.is_empty(), "{view:?}");
        return;
    }
    // A container whose seccomp profile refuses unshare(CLONE_NEWUSER) has no user namespaces at all.
    eprintln!("netlink: no user and network namespace here, even as root: the namespace forgery test did not run");
}

/// A pipe's (read, write) ends.
fn pipe() -> (OwnedFd, OwnedFd) {
    use std::os::fd::FromRawFd;
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 into an array of two descriptors, owned at once.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: both were just made and belong to nobody else.
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

/// A forked child, killed and reaped when dropped (a failed assertion must not leave it waiting).
struct Child(i32);

impl Drop for Child {
    fn drop(&mut self) {
        // SAFETY: kill and waitpid on our own child's pid.
        unsafe {
            libc::kill(self.0, libc::SIGKILL);
            libc::waitpid(self.0, std::ptr::null_mut(), 0);
        }
    }
}

/// Run the forger (see the test) against pcibench's socket in its namespace, returned with what
/// came of the forger's sends once it has finished; None when the namespace could not be made.
fn forge_in_own_namespace(as_nobody: bool) -> Option<(OwnedFd, Sends)> {
    use std::os::fd::AsRawFd;
    // Everything the child sends is made before the fork: after it, only system calls (the
    // test harness's other threads may hold the allocator's locks).
    let link = forged_link();
    let mut forged: Vec<Vec<u8>> = Vec::new();
    for seq in 0..4 {
        forged.push(msg(RTM_NEWLINK, seq, 0, &link));
        forged.push(msg(NLMSG_DONE, seq, 0, &[0; 4]));
    }
    let (ready_r, ready_w) = pipe();
    let (port_r, port_w) = pipe();
    let (done_r, done_w) = pipe();
    // SAFETY: fork(2); the child runs only async-signal-safe system calls on memory made above,
    // then _exit(2).
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork: {}", io::Error::last_os_error());
    if pid == 0 {
        // SAFETY: see above.
        unsafe { forger(as_nobody, &mut forged, ready_w.as_raw_fd(), port_r.as_raw_fd(), done_w.as_raw_fd()) }
    }
    let child = Child(pid);
    drop((ready_w, port_r, done_w));
    let read_exact = |fd: &OwnedFd, buf: &mut [u8]| {
        let mut f = std::fs::File::from(fd.try_clone().unwrap());
        std::io::Read::read_exact(&mut f, buf)
    };
    let mut ready = [0u8];
    read_exact(&ready_r, &mut ready).expect("the forger said nothing");
    if ready[0] != 1 {
        return None;
    }
    let ns = std::fs::File::open(format!("/proc/{pid}/ns/net")).unwrap();
    let sock = std::thread::spawn(move || {
        use rustix::thread::{move_into_link_name_space, LinkNameSpaceType};
        move_into_link_name_space(std::os::fd::AsFd::as_fd(&ns), Some(LinkNameSpaceType::Network)).unwrap();
        socket().unwrap()
    })
    .join()
    .unwrap();
    let port = SocketAddrNetlink::try_from(rustix::net::getsockname(&sock).unwrap()).unwrap().pid();
    let mut w = std::fs::File::from(port_w);
    std::io::Write::write_all(&mut w, &port.to_ne_bytes()).unwrap();
    let mut counts = [0u8; 12];
    read_exact(&done_r, &mut counts).expect("the forger did not finish");
    drop(child);
    let sends: Sends = std::array::from_fn(|i| u32::from_ne_bytes(counts[4 * i..4 * i + 4].try_into().unwrap()));
    Some((sock, sends))
}

/// The forking child: become nobody (if asked), enter a user and network namespace of its own,
/// say so on `ready` (1, or 0 when it cannot), read the victim's port from `port`, send the
/// forgeries (their nlmsg_pid set to that port, as a forger would) and the flood, and write what
/// came of the sends to `done`. Never returns.
///
/// # Safety
/// Called only in a child just forked: system calls only, on memory made before the fork.
unsafe fn forger(as_nobody: bool, forged: &mut [Vec<u8>], ready: i32, port: i32, done: i32) -> ! {
    let say = |fd: i32, b: &[u8]| {
        libc::write(fd, b.as_ptr().cast(), b.len());
    };
    if as_nobody
        && (libc::syscall(libc::SYS_setgroups, 0usize, std::ptr::null::<libc::gid_t>()) != 0
            || libc::syscall(libc::SYS_setresgid, 65534, 65534, 65534) != 0
            || libc::syscall(libc::SYS_setresuid, 65534, 65534, 65534) != 0)
    {
        say(ready, &[0]);
        libc::_exit(0);
    }
    let fd = if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) == 0 {
        libc::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC, libc::NETLINK_ROUTE)
    } else {
        -1
    };
    if fd < 0 {
        say(ready, &[0]);
        libc::_exit(0);
    }
    say(ready, &[1]);
    let mut p = [0u8; 4];
    if libc::read(port, p.as_mut_ptr().cast(), 4) != 4 {
        libc::_exit(1);
    }
    let victim = u32::from_ne_bytes(p);
    let mut to: libc::sockaddr_nl = std::mem::zeroed();
    to.nl_family = libc::AF_NETLINK as u16;
    to.nl_pid = victim;
    let mut sends: Sends = [0; 3];
    let mut send = |d: &[u8]| {
        let r = libc::sendto(
            fd,
            d.as_ptr().cast(),
            d.len(),
            libc::MSG_DONTWAIT,
            (&to as *const libc::sockaddr_nl).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as u32,
        );
        let i = match r {
            r if r >= 0 => 0,
            _ if *libc::__errno_location() == libc::ECONNREFUSED => 1,
            _ => 2,
        };
        sends[i] += 1;
    };
    for d in forged.iter_mut() {
        d[12..16].copy_from_slice(&victim.to_ne_bytes());
        send(d);
    }
    for _ in 0..FLOOD {
        send(&forged[0]);
    }
    let mut out = [0u8; 12];
    for (i, n) in sends.iter().enumerate() {
        out[4 * i..4 * i + 4].copy_from_slice(&n.to_ne_bytes());
    }
    say(done, &out);
    libc::_exit(0)
}
