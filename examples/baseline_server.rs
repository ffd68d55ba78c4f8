//! The load benchmark's yardstick: the same TLS and HTTP stack as
//! `kserve-injector serve` (rustls with ring, TLS 1.2/1.3, ALPN h2 and
//! http/1.1, hyper's HTTP/1.1 and HTTP/2 with the same settings, the body
//! read in full under the same cap) answering every request with a fixed
//! body, so `loadtest/load.sh` can show what the admission work itself costs.
//!
//! ```sh
//! # An AdmissionReview request for a pod manifest, as the API server sends it:
//! cargo run --release --example baseline_server -- review fixtures/m3-modelcar-oci/input.yaml > review.json
//! # Serve a fixed answer (self-signed, like `serve --self-signed`):
//! cargo run --release --example baseline_server -- serve 127.0.0.1:9444 response.json
//! ```

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::{http1, http2};
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

type Error = Box<dyn std::error::Error + Send + Sync>;

fn usage() -> Error {
    "usage: baseline_server review POD.yaml | baseline_server serve ADDR RESPONSE_FILE".into()
}

/// Prints an AdmissionReview (admission.k8s.io/v1, CREATE) wrapping the pod.
fn review(pod_yaml: &str) -> Result<(), Error> {
    let text = std::fs::read_to_string(pod_yaml)?;
    let mut bytes = text.as_bytes();
    let mut docs = kserve_injector_core::reader::documents(&mut bytes)?;
    let pod = docs.next().ok_or("the file holds no document")??;
    let namespace = pod
        .pointer("/metadata/namespace")
        .and_then(|v| v.as_str())
        .unwrap_or("default")
        .to_string();
    let review = serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "0b6f1d84-5d2e-4c2a-9a43-3c1e7f6f0001",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": namespace,
            "operation": "CREATE",
            "userInfo": {
                "username": "system:serviceaccount:kube-system:replicaset-controller",
                "uid": "8f1b7e2a-0000-4000-8000-000000000002",
                "groups": ["system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"]
            },
            "object": pod,
            "oldObject": null,
            "dryRun": false,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}
        }
    });
    println!("{}", serde_json::to_string(&review)?);
    Ok(())
}

fn tls_acceptor() -> Result<TlsAcceptor, Error> {
    let made = rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()])?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(made.signing_key.serialize_der()));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
        .with_no_client_auth()
        .with_single_cert(vec![made.cert.der().clone()], key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

async fn answer(req: Request<Incoming>, fixed: Bytes) -> Response<Full<Bytes>> {
    // Read the body as the real server does, so only the JSON work differs.
    let _ = Limited::new(req.into_body(), 7 * 1024 * 1024)
        .collect()
        .await;
    let mut response = Response::new(Full::new(fixed));
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    response
}

pub async fn serve(addr: SocketAddr, fixed: Bytes) -> Result<(), Error> {
    let acceptor = tls_acceptor()?;
    let listener = TcpListener::bind(addr).await?;
    let mut h1 = http1::Builder::new();
    h1.timer(TokioTimer::new())
        .header_read_timeout(Duration::from_secs(10))
        .keep_alive(true)
        .max_headers(100);
    let mut h2 = http2::Builder::new(TokioExecutor::new());
    h2.timer(TokioTimer::new())
        .max_concurrent_streams(250)
        .max_pending_accept_reset_streams(20)
        .max_local_error_reset_streams(256)
        .max_header_list_size(64 * 1024)
        .keep_alive_interval(Duration::from_secs(30))
        .keep_alive_timeout(Duration::from_secs(10));
    let (h1, h2) = (Arc::new(h1), Arc::new(h2));
    eprintln!("baseline listening on {}", listener.local_addr()?);
    loop {
        let (tcp, _) = listener.accept().await?;
        let _ = tcp.set_nodelay(true);
        let (acceptor, h1, h2, fixed) = (acceptor.clone(), h1.clone(), h2.clone(), fixed.clone());
        tokio::spawn(async move {
            let Ok(Ok(tls)) =
                tokio::time::timeout(Duration::from_secs(10), acceptor.accept(tcp)).await
            else {
                return;
            };
            let is_h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
            let service = service_fn(move |req| {
                let fixed = fixed.clone();
                async move { Ok::<_, Infallible>(answer(req, fixed).await) }
            });
            let io = TokioIo::new(tls);
            let _ = if is_h2 {
                h2.serve_connection(io, service).await
            } else {
                h1.serve_connection(io, service).await
            };
        });
    }
}

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["review", pod] => review(pod),
        ["serve", addr, response] => {
            let fixed = Bytes::from(std::fs::read(response)?);
            let addr: SocketAddr = addr.parse()?;
            tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()?
                .block_on(serve(addr, fixed))
        }
        _ => Err(usage()),
    }
}
