//! Where a mesh listens: loopback by default, or the address
//! [`ADDRESS_SETTING`] picks (an IP address of this host, an interface name,
//! or a network in CIDR form), so that the processes of one launch can run
//! on several hosts.

use std::net::IpAddr;

use crate::MeshError;

/// The setting that picks the address a mesh binds and advertises: an IP
/// address of this host (`10.231.7.1`, `fd00::2`), an interface name
/// (`eth0`: its first IPv4 address, else its first IPv6 one), or a network
/// (`10.231.7.0/24`: this host's address in it). Unset: loopback.
pub const ADDRESS_SETTING: &str = "COMMCHECK_MESH_ADDRESS";

/// The address [`ADDRESS_SETTING`] picks (`127.0.0.1` when it is unset).
/// A value that names no local interface or address is an error listing
/// them.
///
/// ```
/// # use commcheck_mesh::resolve_address;
/// assert_eq!(resolve_address("127.0.0.1").unwrap().to_string(), "127.0.0.1");
/// assert_eq!(resolve_address("lo").unwrap().to_string(), "127.0.0.1");
/// assert_eq!(resolve_address("127.0.0.0/8").unwrap().to_string(), "127.0.0.1");
/// let error = resolve_address("192.0.2.250/32").unwrap_err().to_string();
/// assert!(error.contains("COMMCHECK_MESH_ADDRESS=192.0.2.250/32"), "{error}");
/// ```
pub fn configured_address() -> Result<IpAddr, MeshError> {
    match std::env::var(ADDRESS_SETTING) {
        Ok(value) if !value.trim().is_empty() => resolve_address(value.trim()),
        Ok(_) | Err(std::env::VarError::NotPresent) => Ok(IpAddr::from([127, 0, 0, 1])),
        Err(std::env::VarError::NotUnicode(value)) => Err(MeshError::Setting(format!(
            "{ADDRESS_SETTING}={value:?} is not UTF-8"
        ))),
    }
}

/// Resolves one [`ADDRESS_SETTING`] value against this host's interfaces.
pub fn resolve_address(value: &str) -> Result<IpAddr, MeshError> {
    let interfaces = if_addrs::get_if_addrs().map_err(|e| {
        MeshError::Setting(format!(
            "{ADDRESS_SETTING}={value}: cannot list this host's interfaces: {e}"
        ))
    })?;
    let found = if let Some((network, prefix)) = value.split_once('/') {
        let network: IpAddr = network.parse().map_err(|_| {
            MeshError::Setting(format!(
                "{ADDRESS_SETTING}={value}: {network:?} is no IP address (expected an address, an interface name or a \
                 network such as 10.0.0.0/24)"
            ))
        })?;
        let bits = if network.is_ipv4() { 32 } else { 128 };
        let prefix: u32 = prefix.parse().ok().filter(|p| *p <= bits).ok_or_else(|| {
            MeshError::Setting(format!(
                "{ADDRESS_SETTING}={value}: the prefix length must be 0 to {bits}"
            ))
        })?;
        interfaces
            .iter()
            .map(if_addrs::Interface::ip)
            .find(|ip| within(*ip, network, prefix))
    } else if let Ok(ip) = value.parse::<IpAddr>() {
        interfaces
            .iter()
            .map(if_addrs::Interface::ip)
            .find(|local| *local == ip)
    } else {
        let named = || {
            interfaces
                .iter()
                .filter(|i| i.name == value)
                .map(if_addrs::Interface::ip)
        };
        named().find(IpAddr::is_ipv4).or_else(|| named().next())
    };
    found.ok_or_else(|| {
        MeshError::Setting(format!(
            "{ADDRESS_SETTING}={value} matches no interface of this host; its interfaces: {}",
            listing(&interfaces)
        ))
    })
}

/// Whether `ip` is in `network/prefix` (of the same family).
fn within(ip: IpAddr, network: IpAddr, prefix: u32) -> bool {
    match (ip, network) {
        (IpAddr::V4(ip), IpAddr::V4(network)) => {
            let mask = u32::MAX.checked_shl(32 - prefix).unwrap_or(0);
            u32::from(ip) & mask == u32::from(network) & mask
        }
        (IpAddr::V6(ip), IpAddr::V6(network)) => {
            let mask = u128::MAX.checked_shl(128 - prefix).unwrap_or(0);
            u128::from(ip) & mask == u128::from(network) & mask
        }
        _ => false,
    }
}

/// `name address, address; name address` for an error message.
fn listing(interfaces: &[if_addrs::Interface]) -> String {
    let mut names: Vec<&str> = interfaces.iter().map(|i| i.name.as_str()).collect();
    names.dedup();
    if names.is_empty() {
        return "(none)".into();
    }
    names
        .iter()
        .map(|name| {
            let ips: Vec<String> = interfaces
                .iter()
                .filter(|i| i.name == *name)
                .map(|i| i.ip().to_string())
                .collect();
            format!("{name} {}", ips.join(", "))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Checks, before connecting, that every rank can reach the others:
/// `addresses[r]` is rank `r`'s listener (`ip:port`), `places[r]` where it
/// runs as far as loopback goes (its host name and network namespace, say).
/// Loopback listeners in different places, or listeners of
/// different address families, are an error naming both ranks, at once
/// (instead of a connect limit's wait).
pub fn check_reachable(addresses: &[String], places: &[String]) -> Result<(), MeshError> {
    let parsed: Vec<Option<std::net::SocketAddr>> =
        addresses.iter().map(|a| a.parse().ok()).collect();
    for a in 0..addresses.len() {
        for b in a + 1..addresses.len() {
            let (Some(x), Some(y)) = (parsed[a], parsed[b]) else {
                continue;
            };
            let (pa, pb) = (
                places.get(a).map_or("", String::as_str),
                places.get(b).map_or("", String::as_str),
            );
            if (x.ip().is_loopback() || y.ip().is_loopback()) && pa != pb {
                return Err(MeshError::Protocol(format!(
                    "rank {a} ({pa}) listens on {x} and rank {b} ({pb}) on {y}: they run on different hosts (or \
                     network namespaces), where loopback cannot reach; set {ADDRESS_SETTING} on every rank to an \
                     address, interface or network the hosts share"
                )));
            }
            if x.is_ipv4() != y.is_ipv4() {
                return Err(MeshError::Protocol(format!(
                    "rank {a} listens on {x} and rank {b} on {y}: addresses of different families cannot connect; set \
                     {ADDRESS_SETTING} to addresses of one family on every rank"
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn networks_match_their_addresses_only() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert!(within(ip("10.231.7.2"), ip("10.231.7.0"), 24));
        assert!(!within(ip("10.231.8.2"), ip("10.231.7.0"), 24));
        assert!(within(ip("10.1.2.3"), ip("0.0.0.0"), 0));
        assert!(within(ip("fd00::2"), ip("fd00::"), 64));
        assert!(!within(ip("fd01::2"), ip("fd00::"), 64));
        assert!(!within(ip("10.0.0.1"), ip("fd00::"), 0));
    }

    #[test]
    fn bad_values_are_errors_naming_the_setting() {
        for value in [
            "10.0.0.0/33",
            "nonsense/8",
            "no-such-interface0",
            "203.0.113.77",
        ] {
            let error = resolve_address(value).unwrap_err().to_string();
            assert!(
                error.contains(&format!("{ADDRESS_SETTING}={value}")),
                "{error}"
            );
        }
        let error = resolve_address("no-such-interface0")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("lo 127.0.0.1"),
            "lists the interfaces: {error}"
        );
    }

    #[test]
    fn loopback_across_places_is_refused_at_once() {
        let addresses = vec!["127.0.0.1:4000".to_owned(), "127.0.0.1:4001".to_owned()];
        let same = vec!["h/net:[1]".to_owned(), "h/net:[1]".to_owned()];
        assert!(check_reachable(&addresses, &same).is_ok());
        let apart = vec!["h/net:[1]".to_owned(), "h/net:[2]".to_owned()];
        let error = check_reachable(&addresses, &apart).unwrap_err().to_string();
        assert!(
            error.contains("rank 0") && error.contains("rank 1") && error.contains(ADDRESS_SETTING)
        );
        let mixed = vec!["10.0.0.1:4000".to_owned(), "[fd00::2]:4001".to_owned()];
        let error = check_reachable(&mixed, &same).unwrap_err().to_string();
        assert!(error.contains("different families"), "{error}");
    }
}
