//! Ports for the processes these tests start (kube-apiserver, etcd, the
//! webhook under test), from a block just below the kernel's ephemeral
//! range. The kernel gives ephemeral ports to outgoing connections, so a
//! fixed port inside that range, or one found free by binding port 0 and
//! closing, can be taken by another test's connection before the process
//! binds it: kube-apiserver once failed to start with "address already in
//! use" that way. Below the range only an explicit bind can take a port,
//! and this process hands each one out once.

use std::net::TcpListener;
use std::sync::atomic::{AtomicU32, Ordering};

/// The first of `count` consecutive ports, each free when checked and
/// never handed out before by this process.
pub fn reserve(count: u16) -> u16 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let (low, high) = block();
    // First use starts the block; the compare keeps that to one caller.
    let _ = NEXT.compare_exchange(0, u32::from(low), Ordering::SeqCst, Ordering::SeqCst);
    loop {
        let first = NEXT.fetch_add(u32::from(count), Ordering::SeqCst);
        let end = first + u32::from(count);
        assert!(
            end <= u32::from(high),
            "no test ports left in {low}..{high}"
        );
        let ports = first as u16..end as u16;
        if ports
            .clone()
            .all(|p| TcpListener::bind(("127.0.0.1", p)).is_ok())
        {
            return ports.start;
        }
    }
}

/// One port, as [`reserve`].
pub fn port() -> u16 {
    reserve(1)
}

/// The kernel's ephemeral range (Linux's default when it cannot be read).
fn ephemeral_range() -> (u16, u16) {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|text| {
            let mut parts = text.split_whitespace().map(str::parse::<u16>);
            Some((parts.next()?.ok()?, parts.next()?.ok()?))
        })
        .unwrap_or((32768, 60999))
}

/// 2,000 ports just below the ephemeral range, or above it when it starts
/// too low to leave room.
fn block() -> (u16, u16) {
    match ephemeral_range() {
        (low, _) if low >= 12_000 => (low - 2_000, low),
        (_, high) => {
            assert!(
                high <= 63_000,
                "the ephemeral port range leaves no room for test ports"
            );
            (high + 1, high + 2_001)
        }
    }
}

#[test]
fn reserved_ports_are_distinct_and_outside_the_ephemeral_range() {
    let (low, high) = ephemeral_range();
    let pairs: Vec<u16> = (0..20).map(|_| reserve(2)).collect();
    let mut all: Vec<u16> = pairs.iter().flat_map(|&p| [p, p + 1]).collect();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), 40, "{pairs:?}");
    assert!(all.iter().all(|p| !(low..=high).contains(p)), "{all:?}");
}
