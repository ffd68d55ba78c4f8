//! A second mutating webhook for the end-to-end tests: it appends a sidecar
//! to pods that lack one, as Istio's injector does, so that the API server
//! reinvokes kserve-injector (`reinvocationPolicy: IfNeeded`) on a pod
//! another webhook changed after it.

use base64::Engine;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{json, Value};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

pub const SIDECAR: &str = "e2e-sidecar";

/// Serves HTTPS on a free loopback port with `cert` and `key` (PEM files);
/// runs until the runtime stops.
pub async fn start(cert: &Path, key: &Path) -> SocketAddr {
    let chain = CertificateDer::pem_file_iter(cert)
        .expect("webhook certificate")
        .collect::<Result<Vec<_>, _>>()
        .expect("PEM certificates");
    let key = PrivateKeyDer::from_pem_file(key).expect("webhook key");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .expect("certificate and key match");
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("bound address");
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                if let Ok(tls) = acceptor.accept(tcp).await {
                    let io = TokioIo::new(tls);
                    let _ = http1::Builder::new()
                        .serve_connection(io, service_fn(answer))
                        .await;
                }
            });
        }
    });
    addr
}

async fn answer(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let body = match req.into_body().collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => Bytes::new(),
    };
    let review: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let containers = review
        .pointer("/request/object/spec/containers")
        .and_then(Value::as_array);
    let has_sidecar = containers.is_some_and(|c| c.iter().any(|c| c["name"] == SIDECAR));
    let mut response = json!({"uid": review["request"]["uid"], "allowed": true});
    if !has_sidecar {
        // Hardened as the restricted Pod Security Standard asks, as Istio's
        // own sidecar is, so it passes a namespace that enforces restricted.
        let hardened = json!({"allowPrivilegeEscalation": false, "runAsNonRoot": true,
                              "capabilities": {"drop": ["ALL"]},
                              "seccompProfile": {"type": "RuntimeDefault"}});
        let patch = json!([{"op": "add", "path": "/spec/containers/-",
                            "value": {"name": SIDECAR, "image": "example.com/sidecar:1",
                                      "securityContext": hardened}}]);
        let encoded = base64::engine::general_purpose::STANDARD.encode(patch.to_string());
        response["patchType"] = json!("JSONPatch");
        response["patch"] = json!(encoded);
    }
    let out = json!({"apiVersion": review["apiVersion"], "kind": "AdmissionReview",
                     "response": response});
    Ok(Response::new(Full::new(Bytes::from(out.to_string()))))
}
