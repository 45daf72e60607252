#![no_main]
//! Framing: any byte stream is either a packet, "need more", or an error.
use libfuzzer_sys::fuzz_target;
use manifold_mysql_proto::scan_logical;

fuzz_target!(|data: &[u8]| {
    let limit = usize::from(data.first().copied().unwrap_or(0)) * 1024;
    if let Ok(Some(p)) = scan_logical(data, limit) {
        assert!(p.raw_len <= data.len());
        assert_eq!(p.payload(data).len(), p.payload_len);
    }
});
