#![no_main]
//! Client commands and the generic server packets.
use libfuzzer_sys::fuzz_target;
use manifold_mysql_proto::packets::{decode_session_state, ColumnDefinition, ErrPacket, OkPacket};
use manifold_mysql_proto::Command;

fuzz_target!(|data: &[u8]| {
    if let Ok(c) = Command::decode(data) {
        let _ = c.response_kind();
    }
    let _ = OkPacket::decode(data, u32::MAX);
    let _ = ErrPacket::decode(data);
    let _ = ColumnDefinition::decode(data);
    let _ = decode_session_state(data);
});
