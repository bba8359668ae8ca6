//! Which network addresses liaison may send to: the SSRF rule, pure. Outbound requests go only to
//! globally routable unicast addresses unless the configured allow-list names the address.
//! IPv4-mapped (`::ffff:a.b.c.d`), IPv4-compatible (`::a.b.c.d`) and NAT64 (`64:ff9b::/96`)
//! IPv6 addresses are judged as the IPv4 address they carry.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

pub use ipnet::IpNet;

/// Why an address is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NonGlobal {
    Unspecified,
    Loopback,
    Private,
    LinkLocal,
    SharedCgnat,
    Multicast,
    Broadcast,
    Documentation,
    Benchmarking,
    Reserved,
    UniqueLocal,
    SiteLocal,
    /// Protocol assignments, 6to4 relay anycast, discard-only and other special-purpose blocks.
    SpecialPurpose,
}

impl NonGlobal {
    pub fn as_str(self) -> &'static str {
        match self {
            NonGlobal::Unspecified => "unspecified",
            NonGlobal::Loopback => "loopback",
            NonGlobal::Private => "private",
            NonGlobal::LinkLocal => "link-local",
            NonGlobal::SharedCgnat => "shared (CGNAT)",
            NonGlobal::Multicast => "multicast",
            NonGlobal::Broadcast => "broadcast",
            NonGlobal::Documentation => "documentation",
            NonGlobal::Benchmarking => "benchmarking",
            NonGlobal::Reserved => "reserved",
            NonGlobal::UniqueLocal => "unique local",
            NonGlobal::SiteLocal => "site-local",
            NonGlobal::SpecialPurpose => "special-purpose",
        }
    }
}

/// `Ok` when `ip` is a globally routable unicast address, else the kind of address it is.
pub fn classify(ip: IpAddr) -> Result<(), NonGlobal> {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn in4(ip: Ipv4Addr, net: [u8; 4], prefix: u32) -> bool {
    let mask = if prefix == 0 {
        0
    } else {
        u32::MAX << (32 - prefix)
    };
    u32::from(ip) & mask == u32::from(Ipv4Addr::from(net)) & mask
}

fn classify_v4(ip: Ipv4Addr) -> Result<(), NonGlobal> {
    use NonGlobal::*;
    let table: &[([u8; 4], u32, NonGlobal)] = &[
        ([0, 0, 0, 0], 8, Unspecified),
        ([10, 0, 0, 0], 8, Private),
        ([100, 64, 0, 0], 10, SharedCgnat),
        ([127, 0, 0, 0], 8, Loopback),
        ([169, 254, 0, 0], 16, LinkLocal),
        ([172, 16, 0, 0], 12, Private),
        ([192, 0, 0, 0], 24, SpecialPurpose),
        ([192, 0, 2, 0], 24, Documentation),
        ([192, 31, 196, 0], 24, SpecialPurpose),
        ([192, 52, 193, 0], 24, SpecialPurpose),
        ([192, 88, 99, 0], 24, SpecialPurpose),
        ([192, 168, 0, 0], 16, Private),
        ([192, 175, 48, 0], 24, SpecialPurpose),
        ([198, 18, 0, 0], 15, Benchmarking),
        ([198, 51, 100, 0], 24, Documentation),
        ([203, 0, 113, 0], 24, Documentation),
        ([224, 0, 0, 0], 4, Multicast),
        ([255, 255, 255, 255], 32, Broadcast),
        ([240, 0, 0, 0], 4, Reserved),
    ];
    match table.iter().find(|(net, prefix, _)| in4(ip, *net, *prefix)) {
        Some((_, _, kind)) => Err(*kind),
        None => Ok(()),
    }
}

fn in6(ip: Ipv6Addr, net: [u16; 8], prefix: u32) -> bool {
    let mask = if prefix == 0 {
        0
    } else {
        u128::MAX << (128 - prefix)
    };
    u128::from(ip) & mask == u128::from(Ipv6Addr::from(net)) & mask
}

fn classify_v6(ip: Ipv6Addr) -> Result<(), NonGlobal> {
    use NonGlobal::*;
    if ip.is_unspecified() {
        return Err(Unspecified);
    }
    if ip.is_loopback() {
        return Err(Loopback);
    }
    // An IPv4 address carried in IPv6 is judged as that IPv4 address.
    let embedded = ip.to_ipv4_mapped().or_else(|| {
        let [a, b, c, d, e, f, _, _] = ip.segments();
        let compatible = [a, b, c, d, e, f] == [0; 6];
        let nat64 = in6(ip, [0x64, 0xff9b, 0, 0, 0, 0, 0, 0], 96);
        (compatible || nat64).then(|| {
            let [.., g, h] = ip.segments();
            Ipv4Addr::from((u32::from(g) << 16) | u32::from(h))
        })
    });
    if let Some(v4) = embedded {
        return classify_v4(v4);
    }
    let table: &[([u16; 8], u32, NonGlobal)] = &[
        ([0x64, 0xff9b, 1, 0, 0, 0, 0, 0], 48, SpecialPurpose),
        ([0x100, 0, 0, 0, 0, 0, 0, 0], 64, SpecialPurpose),
        ([0x2001, 0x2, 0, 0, 0, 0, 0, 0], 48, Benchmarking),
        ([0x2001, 0, 0, 0, 0, 0, 0, 0], 23, SpecialPurpose),
        ([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0], 32, Documentation),
        ([0x2002, 0, 0, 0, 0, 0, 0, 0], 16, SpecialPurpose),
        ([0x3fff, 0, 0, 0, 0, 0, 0, 0], 20, Documentation),
        ([0x5f00, 0, 0, 0, 0, 0, 0, 0], 16, SpecialPurpose),
        ([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7, UniqueLocal),
        ([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10, LinkLocal),
        ([0xfec0, 0, 0, 0, 0, 0, 0, 0], 10, SiteLocal),
        ([0xff00, 0, 0, 0, 0, 0, 0, 0], 8, Multicast),
    ];
    if let Some((_, _, kind)) = table.iter().find(|(net, prefix, _)| in6(ip, *net, *prefix)) {
        return Err(*kind);
    }
    // Only 2000::/3 is allocated as global unicast; everything else is reserved.
    if !in6(ip, [0x2000, 0, 0, 0, 0, 0, 0, 0], 3) {
        return Err(Reserved);
    }
    Ok(())
}

/// The outbound address rule: global addresses, plus what the allow-list names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AddressPolicy {
    /// Networks allowed even though not global (e.g. `127.0.0.1/32` for tests).
    pub allow: Vec<IpNet>,
}

impl AddressPolicy {
    /// Parses allow-list entries: addresses or CIDR networks.
    pub fn parse(entries: &[String]) -> Result<AddressPolicy, String> {
        let allow = entries
            .iter()
            .map(|e| {
                e.parse::<IpNet>()
                    .or_else(|_| e.parse::<IpAddr>().map(IpNet::from))
                    .map_err(|_| format!("{e:?} is not an IP address or CIDR network"))
            })
            .collect::<Result<_, _>>()?;
        Ok(AddressPolicy { allow })
    }

    /// `Ok` when liaison may connect to `ip`.
    pub fn check(&self, ip: IpAddr) -> Result<(), NonGlobal> {
        let canonical = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        if self
            .allow
            .iter()
            .any(|net| net.contains(&ip) || net.contains(&canonical))
        {
            return Ok(());
        }
        classify(ip)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn v4(s: &str) -> IpAddr {
        IpAddr::V4(s.parse().unwrap())
    }

    #[test]
    fn known_addresses_are_classified() {
        use NonGlobal::*;
        let cases = [
            ("0.0.0.0", Err(Unspecified)),
            ("127.0.0.1", Err(Loopback)),
            ("10.1.2.3", Err(Private)),
            ("172.16.0.1", Err(Private)),
            ("172.31.255.255", Err(Private)),
            ("172.32.0.1", Ok(())),
            ("192.168.1.1", Err(Private)),
            ("169.254.169.254", Err(LinkLocal)),
            ("100.64.0.1", Err(SharedCgnat)),
            ("100.127.255.255", Err(SharedCgnat)),
            ("100.128.0.1", Ok(())),
            ("224.0.0.1", Err(Multicast)),
            ("255.255.255.255", Err(Broadcast)),
            ("240.0.0.1", Err(Reserved)),
            ("192.0.2.1", Err(Documentation)),
            ("198.51.100.7", Err(Documentation)),
            ("203.0.113.9", Err(Documentation)),
            ("198.18.0.1", Err(Benchmarking)),
            ("198.19.255.255", Err(Benchmarking)),
            ("8.8.8.8", Ok(())),
            ("1.1.1.1", Ok(())),
            ("::", Err(Unspecified)),
            ("::1", Err(Loopback)),
            ("::ffff:127.0.0.1", Err(Loopback)),
            ("::ffff:10.0.0.1", Err(Private)),
            ("::ffff:8.8.8.8", Ok(())),
            ("::127.0.0.1", Err(Loopback)),
            ("::169.254.169.254", Err(LinkLocal)),
            ("64:ff9b::a9fe:a9fe", Err(LinkLocal)),
            ("64:ff9b::808:808", Ok(())),
            ("fc00::1", Err(UniqueLocal)),
            ("fd12:3456::1", Err(UniqueLocal)),
            ("fe80::1", Err(LinkLocal)),
            ("fec0::1", Err(SiteLocal)),
            ("ff02::1", Err(Multicast)),
            ("2001:db8::1", Err(Documentation)),
            ("2001:2::1", Err(Benchmarking)),
            ("2002:7f00:1::1", Err(SpecialPurpose)),
            ("100::1", Err(SpecialPurpose)),
            ("4000::1", Err(Reserved)),
            ("2606:4700:4700::1111", Ok(())),
            ("2a00:1450:4001::1", Ok(())),
        ];
        for (text, expected) in cases {
            let ip: IpAddr = text.parse().unwrap();
            assert_eq!(classify(ip), expected, "{text}");
        }
    }

    #[test]
    fn the_allow_list_admits_what_it_names_and_nothing_else() {
        let policy = AddressPolicy::parse(&["127.0.0.1".into(), "10.1.0.0/16".into()]).unwrap();
        assert_eq!(policy.check(v4("127.0.0.1")), Ok(()));
        assert_eq!(policy.check("::ffff:127.0.0.1".parse().unwrap()), Ok(()));
        assert_eq!(policy.check(v4("127.0.0.2")), Err(NonGlobal::Loopback));
        assert_eq!(policy.check(v4("10.1.200.3")), Ok(()));
        assert_eq!(policy.check(v4("10.2.0.1")), Err(NonGlobal::Private));
        assert_eq!(
            policy.check("::1".parse().unwrap()),
            Err(NonGlobal::Loopback)
        );
        assert!(AddressPolicy::parse(&["localhost".into()]).is_err());
        assert!(AddressPolicy::parse(&["10.0.0.0/33".into()]).is_err());
    }

    /// Every non-global IPv4 block, as (first address, prefix length).
    const V4_BLOCKS: &[([u8; 4], u32)] = &[
        ([0, 0, 0, 0], 8),
        ([10, 0, 0, 0], 8),
        ([100, 64, 0, 0], 10),
        ([127, 0, 0, 0], 8),
        ([169, 254, 0, 0], 16),
        ([172, 16, 0, 0], 12),
        ([192, 0, 0, 0], 24),
        ([192, 0, 2, 0], 24),
        ([192, 168, 0, 0], 16),
        ([198, 18, 0, 0], 15),
        ([198, 51, 100, 0], 24),
        ([203, 0, 113, 0], 24),
        ([224, 0, 0, 0], 3),
    ];

    proptest! {
        #[test]
        fn every_address_of_a_non_global_v4_block_is_refused_in_every_spelling(
            block in 0..V4_BLOCKS.len(),
            host in any::<u32>(),
        ) {
            let (net, prefix) = V4_BLOCKS[block];
            let host_mask = if prefix == 32 { 0 } else { u32::MAX >> prefix };
            let ip = Ipv4Addr::from(u32::from(Ipv4Addr::from(net)) | (host & host_mask));
            prop_assert!(classify(IpAddr::V4(ip)).is_err());
            prop_assert!(classify(IpAddr::V6(ip.to_ipv6_mapped())).is_err());
            prop_assert!(classify(IpAddr::V6(ip.to_ipv6_compatible())).is_err());
            let nat64 = (u128::from(Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0, 0, 0))) | u128::from(u32::from(ip));
            prop_assert!(classify(IpAddr::V6(Ipv6Addr::from(nat64))).is_err());
        }

        #[test]
        fn a_v4_address_is_judged_the_same_in_every_ipv6_spelling(raw in any::<u32>()) {
            let ip = Ipv4Addr::from(raw);
            let plain = classify(IpAddr::V4(ip));
            prop_assert_eq!(classify(IpAddr::V6(ip.to_ipv6_mapped())), plain);
            let nat64 = (u128::from(Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0, 0, 0))) | u128::from(raw);
            prop_assert_eq!(classify(IpAddr::V6(Ipv6Addr::from(nat64))), plain);
            // ::a.b.c.d with a.b > 0 (below that the address is :: or ::1, judged as such).
            if raw > 0xffff {
                prop_assert_eq!(classify(IpAddr::V6(ip.to_ipv6_compatible())), plain);
            }
        }

        #[test]
        fn non_global_v6_blocks_are_refused(
            block in 0usize..5,
            host in any::<u128>(),
        ) {
            let (net, prefix): (u128, u32) = [
                (0xfc00u128 << 112, 7),
                (0xfe80u128 << 112, 10),
                (0xfec0u128 << 112, 10),
                (0xff00u128 << 112, 8),
                (0x2001_0db8u128 << 96, 32),
            ][block];
            let ip = Ipv6Addr::from(net | (host & (u128::MAX >> prefix)));
            prop_assert!(classify(IpAddr::V6(ip)).is_err());
        }

        #[test]
        fn outside_2000_slash_3_nothing_ipv6_native_is_global(host in any::<u128>()) {
            let ip = Ipv6Addr::from(host);
            let native = ip.to_ipv4_mapped().is_none()
                && !ip.segments()[..6].iter().all(|s| *s == 0)
                && !(ip.segments()[0] == 0x64 && ip.segments()[1] == 0xff9b && ip.segments()[2..6].iter().all(|s| *s == 0));
            if native && (host >> 125) != 1 {
                prop_assert!(classify(IpAddr::V6(ip)).is_err());
            }
        }
    }
}
