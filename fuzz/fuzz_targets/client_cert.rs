//! Bytes → a client certificate's claimed identity (Manual §14.6.2: the
//! subject's UID, else CN, as `index:handle`, and its key), what a TLS peer
//! presents when `https_client_certificates` is on. Nothing may panic, and
//! reading the same certificate twice gives the same claim.

#![no_main]

use handled_server::client_cert::ClientCertificate;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let claim = ClientCertificate::parse(data);
    assert_eq!(ClientCertificate::parse(data), claim);
});
