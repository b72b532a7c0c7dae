//! Which handles a mirror server gets: a mirror site spreads its handles over
//! its servers by hash, and each of its servers asks for its own share, named
//! by `(hash type, number of servers, its number)`. HOME/UNHOME go to all.

use crate::ops::OpError;
use handled_proto::data::hash::server_index;
use handled_proto::header::ResponseCode;
use handled_proto::replication::MirrorLayout;

/// Refuse layouts no server could have: at least one server, and a number
/// among them. Hash types other than prefix/suffix/all hash the whole handle,
/// as [`server_index`] does.
pub fn check(layout: &MirrorLayout) -> Result<(), OpError> {
    if layout.num_servers < 1 || layout.server_num < 0 || layout.server_num >= layout.num_servers {
        return Err(OpError::new(
            ResponseCode::PROTOCOL_ERROR,
            format!(
                "Mirror server number {} of {} servers is not a server of a site",
                layout.server_num, layout.num_servers
            ),
        ));
    }
    Ok(())
}

/// Does `handle` belong to the mirror server `layout` describes? Java's
/// `abs(hash % numServers) == serverNum` with the site hash of the handle.
pub fn wants(layout: &MirrorLayout, handle: &[u8]) -> bool {
    layout.num_servers <= 1
        || server_index(handle, layout.hash_type, layout.num_servers as usize) as i32 == layout.server_num
}

#[cfg(test)]
mod tests {
    use super::*;
    use handled_proto::data::hash::handle_hash;

    #[test]
    fn a_handle_goes_to_exactly_one_server_of_a_site() {
        for n in 1..6 {
            for h in [&b"TEST/1"[..], b"TEST/abc", b"0.NA/TEST", b"noslash"] {
                let owners: Vec<i32> = (0..n)
                    .filter(|&k| wants(&MirrorLayout { hash_type: 2, num_servers: n, server_num: k }, h))
                    .collect();
                assert_eq!(owners.len(), 1, "{h:?} over {n} servers");
                assert_eq!(owners[0], handle_hash(h, 2) % n);
            }
        }
    }

    #[test]
    fn impossible_layouts_are_refused() {
        for (n, k) in [(0, 0), (-1, 0), (2, 2), (2, -1)] {
            let layout = MirrorLayout { hash_type: 0, num_servers: n, server_num: k };
            assert_eq!(check(&layout).unwrap_err().code, ResponseCode::PROTOCOL_ERROR);
        }
        assert!(check(&MirrorLayout { hash_type: 0, num_servers: 3, server_num: 2 }).is_ok());
    }
}
