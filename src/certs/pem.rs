//! Certificate files read strictly: PEM `CERTIFICATE` blocks and
//! whitespace, nothing else, and each block exactly one X.509
//! certificate. A lenient reader takes `AAAA` between BEGIN and END as a
//! three-byte certificate and the server then sends it in every handshake,
//! which every client refuses: a file like that must fail when it is
//! loaded, not at the first admission request.

use base64::Engine;
use rustls_pki_types::CertificateDer;
use x509_parser::error::X509Error;

/// Why a certificate file is not a list of certificates. Blocks and lines
/// are counted from 1.
#[derive(Debug, thiserror::Error)]
pub enum PemError {
    #[error("no PEM certificate found")]
    NoCertificate,
    #[error(
        "line {line} holds text outside a PEM block (only whitespace may lie around certificates)"
    )]
    TextOutside { line: usize },
    #[error("block {block} (line {line}) is {label:?}, not a CERTIFICATE")]
    NotCertificate {
        block: usize,
        line: usize,
        label: String,
    },
    #[error("block {block} (line {line}) has no END line: the file is cut short or a block lost its end")]
    Unterminated { block: usize, line: usize },
    #[error("block {block} (line {line}) is empty")]
    EmptyBlock { block: usize, line: usize },
    #[error("block {block} (line {line}) is not valid base64: {source}")]
    Base64 {
        block: usize,
        line: usize,
        source: base64::DecodeError,
    },
    #[error("block {block} (line {line}) is not an X.509 certificate: {source}")]
    NotX509 {
        block: usize,
        line: usize,
        source: x509_parser::nom::Err<X509Error>,
    },
    #[error("block {block} (line {line}) has {extra} bytes after its certificate")]
    TrailingBytes {
        block: usize,
        line: usize,
        extra: usize,
    },
}

const BEGIN: &[u8] = b"-----BEGIN ";
const END: &[u8] = b"-----END ";
const DASHES: &[u8] = b"-----";

/// The certificates of `pem`, in order; at least one.
pub fn certificates(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, PemError> {
    let mut certs = Vec::new();
    let mut lines = pem.split(|&b| b == b'\n').enumerate();
    while let Some((index, line)) = lines.next() {
        let line = line.trim_ascii();
        if line.is_empty() {
            continue;
        }
        let (block, line_no) = (certs.len() + 1, index + 1);
        let Some(label) = begin_label(line) else {
            return Err(PemError::TextOutside { line: line_no });
        };
        if label != b"CERTIFICATE" {
            let label = printable(label);
            let (block, line) = (block, line_no);
            return Err(PemError::NotCertificate { block, line, label });
        }
        let mut body = Vec::new();
        let mut ended = false;
        for (_, line) in lines.by_ref() {
            let line = line.trim_ascii();
            if line == b"-----END CERTIFICATE-----" {
                ended = true;
                break;
            }
            if line.starts_with(BEGIN) || line.starts_with(END) {
                break;
            }
            body.extend(line.iter().filter(|b| !b.is_ascii_whitespace()));
        }
        certs.push(decode(&body, ended, block, line_no)?);
    }
    if certs.is_empty() {
        return Err(PemError::NoCertificate);
    }
    Ok(certs)
}

/// One block's body (its base64 without whitespace) as a certificate.
fn decode(
    body: &[u8],
    ended: bool,
    block: usize,
    line: usize,
) -> Result<CertificateDer<'static>, PemError> {
    if !ended {
        return Err(PemError::Unterminated { block, line });
    }
    if body.is_empty() {
        return Err(PemError::EmptyBlock { block, line });
    }
    let der = base64::engine::general_purpose::STANDARD
        .decode(body)
        .map_err(|source| PemError::Base64 {
            block,
            line,
            source,
        })?;
    let rest = x509_parser::parse_x509_certificate(&der)
        .map_err(|source| PemError::NotX509 {
            block,
            line,
            source,
        })?
        .0;
    if !rest.is_empty() {
        let extra = rest.len();
        return Err(PemError::TrailingBytes { block, line, extra });
    }
    Ok(CertificateDer::from(der))
}

/// The label of a `-----BEGIN LABEL-----` line.
fn begin_label(line: &[u8]) -> Option<&[u8]> {
    line.strip_prefix(BEGIN)?.strip_suffix(DASHES)
}

/// A label from the file, as an error message may show it.
fn printable(label: &[u8]) -> String {
    let shown: String = String::from_utf8_lossy(label).chars().take(40).collect();
    shown.chars().filter(|c| !c.is_control()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::certs::{Authority, Validity};

    fn leaf_and_ca() -> (String, String) {
        let validity = Validity::from(time::OffsetDateTime::now_utc(), 1);
        let ca = Authority::generate("pem test CA", validity).unwrap();
        let leaf = ca.issue_serving("leaf", &["localhost".into()], validity);
        (leaf.unwrap().cert_pem, ca.cert_pem().to_owned())
    }

    fn error(pem: &str) -> String {
        certificates(pem.as_bytes()).unwrap_err().to_string()
    }

    #[test]
    fn a_chain_with_crlf_and_blank_lines_reads_in_order() {
        let (leaf, ca) = leaf_and_ca();
        let text = format!("\n  \n{leaf}\n\n{ca}\n").replace('\n', "\r\n");
        let certs = certificates(text.as_bytes()).unwrap();
        assert_eq!(certs.len(), 2);
        assert_eq!(
            certs[1].as_ref(),
            certificates(ca.as_bytes()).unwrap()[0].as_ref()
        );
    }

    #[test]
    fn every_malformed_block_is_named() {
        let (leaf, ca) = leaf_and_ca();
        let leaf_lines = leaf.lines().count();
        let second = leaf_lines + 1;
        let aaaa = format!("{leaf}-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n");
        assert!(
            error(&aaaa).starts_with(&format!(
                "block 2 (line {second}) is not an X.509 certificate: "
            )),
            "{}",
            error(&aaaa)
        );
        let empty = format!("{leaf}-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n");
        assert_eq!(error(&empty), format!("block 2 (line {second}) is empty"));
        // The CA cut in the middle of its body, END line kept or lost.
        let lines: Vec<&str> = ca.lines().collect();
        let half = lines.len() / 2;
        let cut = format!(
            "{leaf}{}\n-----END CERTIFICATE-----\n",
            lines[..half].join("\n")
        );
        assert!(error(&cut).starts_with("block 2 "), "{}", error(&cut));
        let cut = format!("{leaf}{}\n", lines[..half].join("\n"));
        assert_eq!(
            error(&cut),
            format!("block 2 (line {second}) has no END line: the file is cut short or a block lost its end")
        );
        let text = format!("{leaf}subject=CN = leaf\n");
        assert_eq!(
            error(&text),
            format!("line {second} holds text outside a PEM block (only whitespace may lie around certificates)")
        );
        let key = format!("{leaf}-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n");
        assert_eq!(
            error(&key),
            format!("block 2 (line {second}) is \"PRIVATE KEY\", not a CERTIFICATE")
        );
        let bad = format!("{leaf}-----BEGIN CERTIFICATE-----\nA*AA\n-----END CERTIFICATE-----\n");
        assert!(
            error(&bad).contains("is not valid base64"),
            "{}",
            error(&bad)
        );
        assert_eq!(error(" \n\t\n"), "no PEM certificate found");
    }

    #[test]
    fn bytes_after_the_certificate_in_a_block_are_refused() {
        use base64::Engine;
        let (leaf, _) = leaf_and_ca();
        let mut der = certificates(leaf.as_bytes()).unwrap()[0].to_vec();
        der.extend_from_slice(&[0, 0, 0]);
        let body = base64::engine::general_purpose::STANDARD.encode(der);
        let text = format!("-----BEGIN CERTIFICATE-----\n{body}\n-----END CERTIFICATE-----\n");
        assert_eq!(
            error(&text),
            "block 1 (line 1) has 3 bytes after its certificate"
        );
    }
}
