//! Just enough of a certificate's DER to find its X.509 version and its public key.
//!
//! webpki parses only X.509 v3 certificates, while `openssl x509 -req` without an extensions
//! file (the recipe of many MySQL setup guides) makes v1 ones. When manifold does not verify a
//! backend's certificate it still checks the handshake's signature with the key the
//! certificate carries; this walk finds that key in a certificate of any version. It reads
//! only: nothing found here is trusted beyond "the key the peer presented".
//!
//! ```text
//! Certificate  ::= SEQUENCE { tbsCertificate, signatureAlgorithm, signatureValue }
//! TBSCertificate ::= SEQUENCE { [0] EXPLICIT version DEFAULT v1, serialNumber INTEGER,
//!     signature AlgorithmIdentifier, issuer Name, validity Validity, subject Name,
//!     subjectPublicKeyInfo SubjectPublicKeyInfo, ... }
//! SubjectPublicKeyInfo ::= SEQUENCE { algorithm AlgorithmIdentifier, subjectPublicKey BIT STRING }
//! ```

const SEQUENCE: u8 = 0x30;
const INTEGER: u8 = 0x02;
const BIT_STRING: u8 = 0x03;
/// `[0]` constructed, context-specific: the explicit version tag.
const VERSION_TAG: u8 = 0xA0;

/// X.509 version 1 as encoded (the version field holds the version minus one).
pub(crate) const V1: u8 = 0;

/// What the handshake's signature check needs from a leaf certificate.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct LeafKey<'a> {
    /// The version as encoded: [`V1`] (also when absent), 1 for v2, 2 for v3.
    pub version: u8,
    /// The whole `SubjectPublicKeyInfo`, tag and length included.
    pub spki: &'a [u8],
    /// The contents of the key's `AlgorithmIdentifier`, the form of
    /// `SignatureVerificationAlgorithm::public_key_alg_id`.
    pub alg_id: &'a [u8],
    /// The public key: the `subjectPublicKey` bits, without the unused-bits octet.
    pub key: &'a [u8],
}

/// One DER element and what follows it.
#[derive(Debug, PartialEq, Eq)]
struct Element<'a> {
    tag: u8,
    contents: &'a [u8],
    /// Tag, length and contents.
    whole: &'a [u8],
    rest: &'a [u8],
}

/// The DER element at the start of `input`; `None` for anything but a definite-length,
/// single-octet-tag element that fits.
fn element(input: &[u8]) -> Option<Element<'_>> {
    let (&tag, rest) = input.split_first()?;
    if tag & 0x1F == 0x1F {
        return None; // high tag numbers appear nowhere on the path walked here
    }
    let (&first, mut rest) = rest.split_first()?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let octets = usize::from(first & 0x7F);
        // 0x80 is BER's indefinite length; certificates larger than 4 GiB do not exist.
        if octets == 0 || octets > 4 || rest.len() < octets {
            return None;
        }
        let (bytes, after) = rest.split_at(octets);
        rest = after;
        bytes.iter().fold(0usize, |n, &b| (n << 8) | usize::from(b))
    };
    if rest.len() < len {
        return None;
    }
    let header = input.len() - rest.len();
    let (contents, rest) = rest.split_at(len);
    Some(Element {
        tag,
        contents,
        whole: &input[..header + len],
        rest,
    })
}

/// `element` when its tag is `tag`.
fn expect(input: &[u8], tag: u8) -> Option<Element<'_>> {
    element(input).filter(|e| e.tag == tag)
}

/// The version and public key of the DER certificate `cert`, or `None` when it is not shaped
/// as one.
pub(crate) fn leaf_key(cert: &[u8]) -> Option<LeafKey<'_>> {
    let certificate = expect(cert, SEQUENCE)?.contents;
    let tbs = expect(certificate, SEQUENCE)?.contents;
    let first = element(tbs)?;
    let (version, rest) = if first.tag == VERSION_TAG {
        let number = expect(first.contents, INTEGER)?;
        match (number.contents, number.rest) {
            (&[v], []) => (v, first.rest),
            _ => return None,
        }
    } else {
        (V1, tbs)
    };
    let serial = expect(rest, INTEGER)?;
    let signature = expect(serial.rest, SEQUENCE)?;
    let issuer = expect(signature.rest, SEQUENCE)?;
    let validity = expect(issuer.rest, SEQUENCE)?;
    let subject = expect(validity.rest, SEQUENCE)?;
    let spki = expect(subject.rest, SEQUENCE)?;
    let algorithm = expect(spki.contents, SEQUENCE)?;
    let bits = expect(algorithm.rest, BIT_STRING)?;
    // Keys are whole octets: the unused-bits count is 0.
    let (0, key) = bits.contents.split_first()? else {
        return None;
    };
    if !bits.rest.is_empty() || key.is_empty() {
        return None;
    }
    Some(LeafKey {
        version,
        spki: spki.whole,
        alg_id: algorithm.contents,
        key,
    })
}

#[cfg(test)]
mod tests {
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::CertificateDer;

    use super::*;

    fn der(pem: &str) -> Vec<u8> {
        CertificateDer::from_pem_slice(pem.as_bytes())
            .unwrap()
            .to_vec()
    }

    /// A v3 certificate of `key`, as rcgen makes them.
    fn rcgen_v3(key: &rcgen::KeyPair) -> Vec<u8> {
        let params = rcgen::CertificateParams::new(vec!["localhost".into()]).unwrap();
        params.self_signed(key).unwrap().der().to_vec()
    }

    #[test]
    fn a_v3_certificate_gives_version_3_and_its_keys_spki() {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen_v3(&key);
        let leaf = leaf_key(&cert).expect("parsed");
        assert_eq!(leaf.version, 2);
        assert_eq!(leaf.spki, key.public_key_der().as_slice());
        assert_eq!(leaf.key, key.public_key_raw());
        // The form rustls's verification algorithms name their keys in (ECDSA P-256 here).
        assert!(rustls::crypto::ring::default_provider()
            .signature_verification_algorithms
            .all
            .iter()
            .any(|a| a.public_key_alg_id().as_ref() == leaf.alg_id));
    }

    /// Made by `openssl req -new` + `openssl x509 -req -signkey` (OpenSSL 3.0), no extfile.
    #[test]
    fn openssl_v1_certificates_give_version_1_and_their_keys() {
        for v1 in [super::super::v1certs::ec(), super::super::v1certs::rsa()] {
            let (cert, key) = (v1.cert.as_str(), v1.key.as_str());
            let cert = der(cert);
            let leaf = leaf_key(&cert).expect("parsed");
            assert_eq!(leaf.version, V1);
            let key = rcgen::KeyPair::from_pem(key).unwrap();
            assert_eq!(leaf.spki, key.public_key_der().as_slice());
            assert_eq!(leaf.key, key.public_key_raw());
        }
    }

    #[test]
    fn truncated_or_altered_input_is_refused_without_panic() {
        let cert = der(&super::super::v1certs::rsa().cert);
        for len in 0..cert.len() {
            assert_eq!(leaf_key(&cert[..len]), None, "prefix of {len} bytes");
        }
        // Every single-byte change parses or is refused; none panics or reads out of bounds.
        for i in 0..cert.len() {
            for flip in [0x01, 0x80, 0xFF] {
                let mut altered = cert.clone();
                altered[i] ^= flip;
                let _ = leaf_key(&altered);
            }
        }
        assert_eq!(leaf_key(&[]), None);
        assert_eq!(leaf_key(&[0x30, 0x80, 0, 0]), None, "indefinite length");
        assert_eq!(
            leaf_key(&[0x30, 0x85, 1, 0, 0, 0, 0]),
            None,
            "5-octet length"
        );
        assert_eq!(leaf_key(&[0x3F, 0x00]), None, "high tag number");
    }

    #[test]
    fn lengths_in_long_form_are_read() {
        let e = element(&[0x04, 0x81, 0x02, 7, 8, 9]).unwrap();
        let expected = Element {
            tag: 4,
            contents: &[7, 8],
            whole: &[4, 0x81, 2, 7, 8],
            rest: &[9],
        };
        assert_eq!(e, expected);
        let mut long = vec![0x04, 0x82, 0x01, 0x00];
        long.extend([0xAB; 256]);
        assert_eq!(element(&long).unwrap().contents.len(), 256);
        long.pop();
        assert_eq!(element(&long), None, "one octet short");
    }
}
