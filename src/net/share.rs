//! Each client address's share of the connection cap, so that one address cannot hold every
//! slot: an address holds at most `max_connections_per_address` connections at once, and the last
//! [`reserve`] free slots go only to addresses that hold none (a health check, a monitoring
//! probe, a new client) while one address crowds the rest.
//!
//! An IPv4 address counts alone; IPv6 addresses count by their /64 (one host usually has a whole
//! /64, and per-address shares within it would be free to multiply). An IPv4-mapped IPv6 address
//! counts as its IPv4 address. Behind a reverse proxy every connection comes from the proxy:
//! raise the share to `max_connections` there (docs/operators.md, "Running in production").

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Arc, Mutex};

/// Why a connection was refused its slot (the `reason` label of
/// `liaison_connections_refused_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refusal {
    /// The address holds its whole share.
    PerAddress,
    /// Only the reserve is left, and the address already holds a connection.
    Reserve,
}

impl Refusal {
    pub(super) fn label(self) -> &'static str {
        match self {
            Refusal::PerAddress => "per_address",
            Refusal::Reserve => "reserve",
        }
    }
}

/// The free slots kept for addresses holding no connection: a 32nd of the cap, at least one when
/// the cap allows two or more.
pub(super) fn reserve(max_connections: usize) -> usize {
    if max_connections < 2 {
        0
    } else {
        (max_connections / 32).max(1)
    }
}

/// What each address holds now.
#[derive(Debug)]
pub(super) struct Shares {
    per_address: usize,
    reserve: usize,
    held: Mutex<HashMap<IpAddr, usize>>,
}

/// One connection's part of its address's share; given back when dropped.
#[derive(Debug)]
pub(super) struct Share {
    shares: Arc<Shares>,
    key: IpAddr,
}

impl Shares {
    pub(super) fn new(per_address: usize, reserve: usize) -> Arc<Shares> {
        Arc::new(Shares {
            per_address,
            reserve,
            held: Mutex::new(HashMap::new()),
        })
    }

    /// A share for a connection from `addr`, when `free` slots are left besides its own.
    pub(super) fn take(self: &Arc<Self>, addr: IpAddr, free: usize) -> Result<Share, Refusal> {
        let key = client_key(addr);
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let count = held.get(&key).copied().unwrap_or(0);
        if count >= self.per_address {
            return Err(Refusal::PerAddress);
        }
        if count > 0 && free < self.reserve {
            return Err(Refusal::Reserve);
        }
        *held.entry(key).or_insert(0) += 1;
        Ok(Share {
            shares: self.clone(),
            key,
        })
    }

    #[cfg(test)]
    fn addresses(&self) -> usize {
        self.held.lock().unwrap().len()
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        let mut held = self.shares.held.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(count) = held.get_mut(&self.key) {
            *count -= 1;
            if *count == 0 {
                held.remove(&self.key);
            }
        }
    }
}

/// The key an address's connections count under: the IPv4 address, or the IPv6 /64.
fn client_key(addr: IpAddr) -> IpAddr {
    match addr {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let prefix = u128::from(v6) & !((1u128 << 64) - 1);
                IpAddr::V6(Ipv6Addr::from(prefix))
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn an_address_holds_at_most_its_share_and_gets_it_back_as_connections_close() {
        let shares = Shares::new(2, 0);
        let a = shares.take(ip("10.0.0.1"), 100).unwrap();
        let b = shares.take(ip("10.0.0.1"), 100).unwrap();
        assert_eq!(
            shares.take(ip("10.0.0.1"), 100).unwrap_err(),
            Refusal::PerAddress
        );
        // Another address is not touched by the first one's share.
        let other = shares.take(ip("10.0.0.2"), 100).unwrap();
        drop(a);
        let c = shares.take(ip("10.0.0.1"), 100).unwrap();
        drop((b, c, other));
        assert_eq!(
            shares.addresses(),
            0,
            "an address holding nothing is forgotten"
        );
    }

    #[test]
    fn the_reserve_goes_only_to_addresses_holding_none() {
        let shares = Shares::new(10, 2);
        let _held = shares.take(ip("10.0.0.1"), 5).unwrap();
        assert_eq!(
            shares.take(ip("10.0.0.1"), 1).unwrap_err(),
            Refusal::Reserve
        );
        let _first = shares
            .take(ip("10.0.0.9"), 1)
            .expect("a new address gets the reserve");
        assert_eq!(reserve(512), 16);
        assert_eq!(reserve(4), 1);
        assert_eq!(reserve(1), 0);
    }

    #[test]
    fn ipv6_counts_by_its_64_and_mapped_ipv4_as_ipv4() {
        let shares = Shares::new(1, 0);
        let _a = shares.take(ip("2001:db8:1:2::1"), 10).unwrap();
        assert!(
            shares.take(ip("2001:db8:1:2:ffff::9"), 10).is_err(),
            "same /64"
        );
        assert!(
            shares.take(ip("2001:db8:1:3::1"), 10).is_ok(),
            "another /64"
        );
        let _v4 = shares.take(ip("192.0.2.7"), 10).unwrap();
        assert!(
            shares.take(ip("::ffff:192.0.2.7"), 10).is_err(),
            "the same IPv4 host"
        );
    }
}
