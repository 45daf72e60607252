#![no_main]
//! Connection phase packets from either side.
use libfuzzer_sys::fuzz_target;
use manifold_mysql_proto::handshake::{AuthSwitchRequest, ChangeUser, HandshakeResponse, HandshakeV10};

fuzz_target!(|data: &[u8]| {
    let _ = HandshakeV10::decode(data);
    let _ = HandshakeResponse::is_ssl_request(data);
    if let Ok(r) = HandshakeResponse::decode(data) {
        let mut out = Vec::new();
        r.encode(&mut out);
    }
    let _ = AuthSwitchRequest::decode(data);
    let _ = ChangeUser::decode(data, u32::MAX);
    let _ = ChangeUser::decode(data, 0);
});
