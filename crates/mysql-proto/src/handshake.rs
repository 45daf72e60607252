//! Connection phase: the server's initial handshake (v10), the client's response (4.1), the
//! TLS upgrade request, auth switch and auth "more data" packets.

use crate::codec::{put_lenenc_bytes, put_nul_bytes, put_u16, put_u32, Reader};
use crate::consts::caps;
use crate::errors::ProtoError;

/// Initial handshake packet, protocol version 10.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandshakeV10 {
    pub server_version: Vec<u8>,
    pub connection_id: u32,
    /// Scramble (nonce), 20 bytes for both supported plugins.
    pub auth_data: Vec<u8>,
    pub capabilities: u32,
    pub charset: u8,
    pub status: u16,
    pub auth_plugin: Vec<u8>,
}

impl HandshakeV10 {
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(10);
        put_nul_bytes(out, &self.server_version);
        put_u32(out, self.connection_id);
        let (part1, part2) = self.auth_data.split_at(self.auth_data.len().min(8));
        out.extend_from_slice(part1);
        out.extend(std::iter::repeat_n(0, 8 - part1.len()));
        out.push(0);
        put_u16(out, self.capabilities as u16);
        out.push(self.charset);
        put_u16(out, self.status);
        put_u16(out, (self.capabilities >> 16) as u16);
        if self.capabilities & caps::PLUGIN_AUTH != 0 {
            out.push((self.auth_data.len() + 1) as u8);
        } else {
            out.push(0);
        }
        out.extend_from_slice(&[0; 10]);
        if self.capabilities & caps::SECURE_CONNECTION != 0 {
            // At least 12 bytes and a NUL: clients read max(13, len - 8) bytes.
            out.extend_from_slice(part2);
            out.extend(std::iter::repeat_n(0, 12usize.saturating_sub(part2.len())));
            out.push(0);
        }
        if self.capabilities & caps::PLUGIN_AUTH != 0 {
            put_nul_bytes(out, &self.auth_plugin);
        }
    }

    pub fn decode(payload: &[u8]) -> Result<Self, ProtoError> {
        let mut r = Reader::new(payload);
        match r.u8()? {
            10 => {}
            0xFF => return Err(ProtoError::Malformed("server refused the connection (ERR)")),
            _ => {
                return Err(ProtoError::Malformed(
                    "unsupported handshake protocol version",
                ))
            }
        }
        let server_version = r.nul_bytes()?.to_vec();
        let connection_id = r.u32()?;
        let mut auth_data = r.take(8)?.to_vec();
        r.u8()?;
        let mut capabilities = u32::from(r.u16()?);
        let (mut charset, mut status, mut auth_len) = (0, 0, 0);
        if !r.is_empty() {
            charset = r.u8()?;
            status = r.u16()?;
            capabilities |= u32::from(r.u16()?) << 16;
            auth_len = r.u8()?;
            r.take(10)?;
        }
        if capabilities & caps::SECURE_CONNECTION != 0 {
            let n = (usize::from(auth_len).saturating_sub(8)).max(13);
            let part2 = r.take(n.min(r.remaining()))?;
            // The last byte is a NUL terminator, not scramble.
            let part2 = part2.strip_suffix(&[0]).unwrap_or(part2);
            auth_data.extend_from_slice(part2);
        }
        let auth_plugin = if capabilities & caps::PLUGIN_AUTH != 0 {
            r.nul_or_rest().to_vec()
        } else {
            Vec::new()
        };
        Ok(Self {
            server_version,
            connection_id,
            auth_data,
            capabilities,
            charset,
            status,
            auth_plugin,
        })
    }
}

/// The client's answer to the handshake (`HandshakeResponse41`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HandshakeResponse {
    pub capabilities: u32,
    pub max_packet: u32,
    pub charset: u8,
    pub user: Vec<u8>,
    pub auth_response: Vec<u8>,
    pub database: Option<Vec<u8>>,
    pub auth_plugin: Option<Vec<u8>>,
    pub attributes: Attributes,
}

/// Size of an SSL request packet: the fixed part of a handshake response.
pub const SSL_REQUEST_LEN: usize = 32;

impl HandshakeResponse {
    /// True when `payload` is an `SSLRequest`: the first 32 bytes of a response with the SSL
    /// capability, sent in clear before the TLS handshake.
    pub fn is_ssl_request(payload: &[u8]) -> bool {
        payload.len() == SSL_REQUEST_LEN
            && u32::from_le_bytes([payload[0], payload[1], payload[2], payload[3]]) & caps::SSL != 0
    }

    pub fn encode_ssl_request(&self, out: &mut Vec<u8>) {
        put_u32(out, self.capabilities | caps::SSL);
        put_u32(out, self.max_packet);
        out.push(self.charset);
        out.extend_from_slice(&[0; 23]);
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        let c = self.capabilities;
        put_u32(out, c);
        put_u32(out, self.max_packet);
        out.push(self.charset);
        out.extend_from_slice(&[0; 23]);
        put_nul_bytes(out, &self.user);
        if c & caps::PLUGIN_AUTH_LENENC_CLIENT_DATA != 0 {
            put_lenenc_bytes(out, &self.auth_response);
        } else if c & caps::SECURE_CONNECTION != 0 {
            out.push(self.auth_response.len() as u8);
            out.extend_from_slice(&self.auth_response);
        } else {
            put_nul_bytes(out, &self.auth_response);
        }
        if c & caps::CONNECT_WITH_DB != 0 {
            put_nul_bytes(out, self.database.as_deref().unwrap_or_default());
        }
        if c & caps::PLUGIN_AUTH != 0 {
            put_nul_bytes(out, self.auth_plugin.as_deref().unwrap_or_default());
        }
        if c & caps::CONNECT_ATTRS != 0 {
            encode_attributes(out, &self.attributes);
        }
    }

    pub fn decode(payload: &[u8]) -> Result<Self, ProtoError> {
        let mut r = Reader::new(payload);
        let capabilities = r.u32()?;
        if capabilities & caps::PROTOCOL_41 == 0 {
            return Err(ProtoError::Protocol41Required);
        }
        let max_packet = r.u32()?;
        let charset = r.u8()?;
        r.take(23)?;
        let user = r.nul_bytes()?.to_vec();
        let auth_response = if capabilities & caps::PLUGIN_AUTH_LENENC_CLIENT_DATA != 0 {
            r.lenenc_bytes()?.to_vec()
        } else if capabilities & caps::SECURE_CONNECTION != 0 {
            let n = r.u8()?;
            r.take(usize::from(n))?.to_vec()
        } else {
            r.nul_bytes()?.to_vec()
        };
        let database = if capabilities & caps::CONNECT_WITH_DB != 0 && !r.is_empty() {
            Some(r.nul_or_rest().to_vec())
        } else {
            None
        };
        let auth_plugin = if capabilities & caps::PLUGIN_AUTH != 0 && !r.is_empty() {
            Some(r.nul_or_rest().to_vec())
        } else {
            None
        };
        let attributes = if capabilities & caps::CONNECT_ATTRS != 0 && !r.is_empty() {
            decode_attributes(&mut r)?
        } else {
            Vec::new()
        };
        Ok(Self {
            capabilities,
            max_packet,
            charset,
            user,
            auth_response,
            database,
            auth_plugin,
            attributes,
        })
    }
}

/// Connection attributes (key, value), as the client sent them.
pub type Attributes = Vec<(Vec<u8>, Vec<u8>)>;

/// Connection attributes on the wire: a length-encoded block of length-encoded key/value strings.
fn encode_attributes(out: &mut Vec<u8>, attributes: &Attributes) {
    let mut block = Vec::new();
    for (k, v) in attributes {
        put_lenenc_bytes(&mut block, k);
        put_lenenc_bytes(&mut block, v);
    }
    put_lenenc_bytes(out, &block);
}

fn decode_attributes(r: &mut Reader<'_>) -> Result<Attributes, ProtoError> {
    let mut block = Reader::new(r.lenenc_bytes()?);
    let mut attributes = Vec::new();
    while !block.is_empty() {
        let k = block.lenenc_bytes()?.to_vec();
        attributes.push((k, block.lenenc_bytes()?.to_vec()));
    }
    Ok(attributes)
}

/// `AuthSwitchRequest`: 0xFE, plugin name, plugin data (the scramble, usually NUL-terminated).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthSwitchRequest {
    pub plugin: Vec<u8>,
    pub data: Vec<u8>,
}

impl AuthSwitchRequest {
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(0xFE);
        put_nul_bytes(out, &self.plugin);
        out.extend_from_slice(&self.data);
        // Servers end the scramble with a NUL; clients expect it.
        out.push(0);
    }

    pub fn decode(payload: &[u8]) -> Result<Self, ProtoError> {
        let mut r = Reader::new(payload);
        if r.u8()? != 0xFE {
            return Err(ProtoError::Malformed("not an auth switch request"));
        }
        let plugin = r.nul_or_rest().to_vec();
        let data = r.rest();
        let data = data.strip_suffix(&[0]).unwrap_or(data).to_vec();
        Ok(Self { plugin, data })
    }
}

/// `AuthMoreData`: 0x01 followed by plugin-specific bytes.
pub fn encode_auth_more_data(out: &mut Vec<u8>, data: &[u8]) {
    out.push(0x01);
    out.extend_from_slice(data);
}

/// `COM_CHANGE_USER` request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ChangeUser {
    pub user: Vec<u8>,
    pub auth_response: Vec<u8>,
    pub database: Vec<u8>,
    pub charset: Option<u16>,
    pub auth_plugin: Option<Vec<u8>>,
    pub attributes: Attributes,
}

impl ChangeUser {
    /// `payload` includes the command byte. `capabilities` are the session's negotiated ones.
    pub fn decode(payload: &[u8], capabilities: u32) -> Result<Self, ProtoError> {
        let mut r = Reader::new(payload);
        r.u8()?;
        let user = r.nul_bytes()?.to_vec();
        let auth_response = if capabilities & caps::SECURE_CONNECTION != 0 {
            let n = r.u8()?;
            r.take(usize::from(n))?.to_vec()
        } else {
            r.nul_bytes()?.to_vec()
        };
        let database = r.nul_or_rest().to_vec();
        let charset = if r.remaining() >= 2 {
            Some(r.u16()?)
        } else {
            None
        };
        let auth_plugin = if capabilities & caps::PLUGIN_AUTH != 0 && !r.is_empty() {
            Some(r.nul_or_rest().to_vec())
        } else {
            None
        };
        let attributes = if capabilities & caps::CONNECT_ATTRS != 0 && !r.is_empty() {
            decode_attributes(&mut r)?
        } else {
            Vec::new()
        };
        Ok(Self {
            user,
            auth_response,
            database,
            charset,
            auth_plugin,
            attributes,
        })
    }

    pub fn encode(&self, out: &mut Vec<u8>, capabilities: u32) {
        out.push(crate::consts::command::CHANGE_USER);
        put_nul_bytes(out, &self.user);
        if capabilities & caps::SECURE_CONNECTION != 0 {
            out.push(self.auth_response.len() as u8);
            out.extend_from_slice(&self.auth_response);
        } else {
            put_nul_bytes(out, &self.auth_response);
        }
        put_nul_bytes(out, &self.database);
        if let Some(cs) = self.charset {
            put_u16(out, cs);
            if capabilities & caps::PLUGIN_AUTH != 0 {
                put_nul_bytes(out, self.auth_plugin.as_deref().unwrap_or_default());
            }
            if capabilities & caps::CONNECT_ATTRS != 0 {
                encode_attributes(out, &self.attributes);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn handshake() -> impl Strategy<Value = HandshakeV10> {
        (
            proptest::collection::vec(1u8..=255, 0..40),
            any::<u32>(),
            proptest::collection::vec(1u8..=127, 20),
            any::<u8>(),
            any::<u16>(),
            proptest::collection::vec(1u8..=255, 0..30),
            any::<u32>(),
        )
            .prop_map(
                |(v, id, scramble, charset, status, plugin, extra)| HandshakeV10 {
                    server_version: v,
                    connection_id: id,
                    auth_data: scramble,
                    capabilities: (extra & !caps::SSL)
                        | caps::PROTOCOL_41
                        | caps::SECURE_CONNECTION
                        | caps::PLUGIN_AUTH,
                    charset,
                    status,
                    auth_plugin: plugin,
                },
            )
    }

    fn response() -> impl Strategy<Value = HandshakeResponse> {
        (
            any::<u32>(),
            any::<u32>(),
            any::<u8>(),
            proptest::collection::vec(1u8..=255, 0..20),
            proptest::collection::vec(any::<u8>(), 0..60),
            proptest::option::of(proptest::collection::vec(1u8..=255, 0..20)),
            proptest::option::of(proptest::collection::vec(1u8..=255, 0..20)),
            proptest::collection::vec(
                (
                    proptest::collection::vec(any::<u8>(), 0..10),
                    proptest::collection::vec(any::<u8>(), 0..10),
                ),
                0..4,
            ),
        )
            .prop_map(|(c, max_packet, charset, user, auth, db, plugin, attrs)| {
                let mut capabilities = c | caps::PROTOCOL_41 | caps::SECURE_CONNECTION;
                capabilities = if db.is_some() {
                    capabilities | caps::CONNECT_WITH_DB
                } else {
                    capabilities & !caps::CONNECT_WITH_DB
                };
                capabilities = if plugin.is_some() {
                    capabilities | caps::PLUGIN_AUTH
                } else {
                    capabilities & !caps::PLUGIN_AUTH
                };
                capabilities = if attrs.is_empty() {
                    capabilities & !caps::CONNECT_ATTRS
                } else {
                    capabilities | caps::CONNECT_ATTRS
                };
                // Without the lenenc flag the response length is one byte.
                let auth = if capabilities & caps::PLUGIN_AUTH_LENENC_CLIENT_DATA == 0 {
                    auth.into_iter().take(250).collect()
                } else {
                    auth
                };
                HandshakeResponse {
                    capabilities,
                    max_packet,
                    charset,
                    user,
                    auth_response: auth,
                    database: db,
                    auth_plugin: plugin,
                    attributes: attrs,
                }
            })
    }

    proptest! {
        #[test]
        fn handshake_round_trips(h in handshake()) {
            let mut out = Vec::new();
            h.encode(&mut out);
            prop_assert_eq!(HandshakeV10::decode(&out).unwrap(), h);
        }

        #[test]
        fn response_round_trips(r in response()) {
            let mut out = Vec::new();
            r.encode(&mut out);
            prop_assert_eq!(HandshakeResponse::decode(&out).unwrap(), r);
        }

        #[test]
        fn change_user_round_trips(user in proptest::collection::vec(1u8..=255, 0..20), auth in proptest::collection::vec(any::<u8>(), 0..40),
                                   db in proptest::collection::vec(1u8..=255, 0..20), cs in any::<u16>(), plugin in proptest::collection::vec(1u8..=255, 1..20)) {
            let c = ChangeUser { user, auth_response: auth, database: db, charset: Some(cs), auth_plugin: Some(plugin), attributes: vec![(b"k".to_vec(), b"v".to_vec())] };
            let flags = caps::SECURE_CONNECTION | caps::PLUGIN_AUTH | caps::CONNECT_ATTRS | caps::PROTOCOL_41;
            let mut out = Vec::new();
            c.encode(&mut out, flags);
            prop_assert_eq!(ChangeUser::decode(&out, flags).unwrap(), c);
        }

        #[test]
        fn auth_switch_round_trips(plugin in proptest::collection::vec(1u8..=255, 0..30), data in proptest::collection::vec(1u8..=255, 0..30)) {
            let a = AuthSwitchRequest { plugin, data };
            let mut out = Vec::new();
            a.encode(&mut out);
            prop_assert_eq!(AuthSwitchRequest::decode(&out).unwrap(), a);
        }

        #[test]
        fn garbage_never_panics(b in proptest::collection::vec(any::<u8>(), 0..120)) {
            let _ = HandshakeV10::decode(&b);
            let _ = HandshakeResponse::decode(&b);
            let _ = AuthSwitchRequest::decode(&b);
            let _ = ChangeUser::decode(&b, u32::MAX);
            let _ = HandshakeResponse::is_ssl_request(&b);
        }
    }

    #[test]
    fn ssl_request_is_recognised() {
        let r = HandshakeResponse {
            capabilities: caps::PROTOCOL_41,
            max_packet: 1 << 24,
            charset: 45,
            ..Default::default()
        };
        let mut out = Vec::new();
        r.encode_ssl_request(&mut out);
        assert!(HandshakeResponse::is_ssl_request(&out));
        let mut full = Vec::new();
        r.encode(&mut full);
        assert!(!HandshakeResponse::is_ssl_request(&full));
    }
}
