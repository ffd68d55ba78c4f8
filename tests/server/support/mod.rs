//! Shared helpers for the server integration tests: a throwaway PKI, a
//! kubelet-style projected directory, TLS HTTP/1.1 and HTTP/2 clients, and
//! the golden-fixture plumbing. Each test binary uses a different subset.
#![allow(dead_code)]

use base64::Engine;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::client::conn::{http1, http2};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use kserve_injector::server::args::ServeArgs;
use kserve_injector::server::{RunningServer, Server};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::ClientConfig;
use serde_json::{json, Value};
use std::convert::Infallible;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

pub mod process;

pub type Error = Box<dyn std::error::Error + Send + Sync>;
pub type TestResult = Result<(), Error>;
pub type Body = BoxBody<Bytes, Infallible>;

/// Generous: the machine running these has two cores shared with builds.
pub const PATIENCE: Duration = Duration::from_secs(20);

pub fn fail(message: impl Into<String>) -> Error {
    message.into().into()
}

pub fn ensure(condition: bool, message: impl FnOnce() -> String) -> TestResult {
    if condition {
        Ok(())
    } else {
        Err(fail(message()))
    }
}

/// Polls `probe` until it yields a value or `limit` passes.
pub async fn eventually<T, F, Fut>(limit: Duration, what: &str, mut probe: F) -> Result<T, Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + limit;
    loop {
        if let Some(value) = probe().await {
            return Ok(value);
        }
        if Instant::now() >= deadline {
            return Err(fail(format!(
                "timed out after {limit:?} waiting for {what}"
            )));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

// ---------------------------------------------------------------- PKI

pub struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
    pub pem: String,
}

/// A certificate and its key, as PEM files would hold them.
#[derive(Clone)]
pub struct Leaf {
    pub cert_pem: String,
    pub key_pem: String,
    pub der: CertificateDer<'static>,
}

impl Ca {
    pub fn new(name: &str) -> Result<Self, Error> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate()?)?;
        let pem = issuer.pem();
        Ok(Self { issuer, pem })
    }

    fn issue(
        &self,
        cn: &str,
        names: &[&str],
        usage: ExtendedKeyUsagePurpose,
    ) -> Result<Leaf, Error> {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = CertificateParams::new(names)?;
        params.distinguished_name.push(DnType::CommonName, cn);
        params.extended_key_usages = vec![usage];
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(Leaf {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            der: cert.der().clone(),
        })
    }

    /// A serving certificate for the names the tests connect to.
    pub fn server(&self, cn: &str) -> Result<Leaf, Error> {
        self.issue(
            cn,
            &["localhost", "127.0.0.1"],
            ExtendedKeyUsagePurpose::ServerAuth,
        )
    }

    /// A serving certificate valid only from `from` to `to`.
    pub fn server_valid(
        &self,
        cn: &str,
        from: time::OffsetDateTime,
        to: time::OffsetDateTime,
    ) -> Result<Leaf, Error> {
        let mut params = CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()])?;
        params.distinguished_name.push(DnType::CommonName, cn);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        (params.not_before, params.not_after) = (from, to);
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(Leaf {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            der: cert.der().clone(),
        })
    }

    pub fn client(&self, cn: &str) -> Result<Leaf, Error> {
        self.issue(cn, &[], ExtendedKeyUsagePurpose::ClientAuth)
    }
}

// ---------------------------------------------------------------- files

/// A directory laid out the way kubelet projects a Secret or ConfigMap:
/// `..<version>/` with the data, `..data` pointing at it, and one symlink
/// per key through `..data`. Updates swap `..data` atomically.
pub struct KubeletDir {
    pub path: PathBuf,
    version: u32,
}

impl KubeletDir {
    pub fn create(path: &Path, files: &[(&str, &[u8])]) -> Result<Self, Error> {
        std::fs::create_dir_all(path)?;
        let mut dir = Self {
            path: path.to_path_buf(),
            version: 0,
        };
        dir.swap(files)?;
        Ok(dir)
    }

    pub fn swap(&mut self, files: &[(&str, &[u8])]) -> TestResult {
        self.swap_with_fifo(files, None)
    }

    /// [`KubeletDir::swap`], with `fifo` (a key) a FIFO in the new version.
    pub fn swap_with_fifo(&mut self, files: &[(&str, &[u8])], fifo: Option<&str>) -> TestResult {
        let old = format!("..v{}", self.version);
        self.version += 1;
        let new = format!("..v{}", self.version);
        let version_dir = self.path.join(&new);
        std::fs::create_dir(&version_dir)?;
        for (name, bytes) in files {
            std::fs::write(version_dir.join(name), bytes)?;
        }
        if let Some(name) = fifo {
            mkfifo(&version_dir.join(name))?;
        }
        let tmp = self.path.join("..data_tmp");
        std::os::unix::fs::symlink(&new, &tmp)?;
        std::fs::rename(&tmp, self.path.join("..data"))?;
        let names = files.iter().map(|(name, _)| *name).chain(fifo);
        for name in names {
            let link = self.path.join(name);
            if std::fs::symlink_metadata(&link).is_err() {
                std::os::unix::fs::symlink(format!("..data/{name}"), &link)?;
            }
        }
        if self.version > 1 {
            std::fs::remove_dir_all(self.path.join(old))?;
        }
        Ok(())
    }
}

pub fn mkfifo(path: &Path) -> TestResult {
    let made = std::process::Command::new("mkfifo").arg(path).status()?;
    ensure(made.success(), || format!("mkfifo {}", path.display()))
}

pub fn cert_files(leaf: &Leaf) -> [(&'static str, Vec<u8>); 2] {
    [
        ("tls.crt", leaf.cert_pem.clone().into_bytes()),
        ("tls.key", leaf.key_pem.clone().into_bytes()),
    ]
}

pub fn as_refs<'a>(files: &'a [(&'static str, Vec<u8>)]) -> Vec<(&'static str, &'a [u8])> {
    files.iter().map(|(n, b)| (*n, b.as_slice())).collect()
}

// ---------------------------------------------------------------- server

/// Starts the server in-process on ephemeral loopback ports.
pub async fn start(flags: &[&str]) -> Result<RunningServer, Error> {
    let mut all = vec!["--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"];
    // A developer's KUBECONFIG must not turn the lookups on in these tests.
    if !flags
        .iter()
        .any(|f| *f == "--cluster-lookups" || *f == "--objects")
    {
        all.extend(["--cluster-lookups", "off"]);
    }
    all.extend_from_slice(flags);
    let args = ServeArgs::try_parse_from(all)?;
    Ok(Server::start(args).await?)
}

/// A self-signed server plus the CA to trust it, in `dir`.
pub async fn start_self_signed(
    dir: &Path,
    flags: &[&str],
) -> Result<(RunningServer, String), Error> {
    let ca_file = dir.join("ca.crt");
    let ca_flag = ca_file.to_string_lossy().into_owned();
    let mut all = vec!["--self-signed", "--self-signed-ca-file", ca_flag.as_str()];
    all.extend_from_slice(flags);
    let server = start(&all).await?;
    let ca = std::fs::read_to_string(&ca_file)?;
    Ok((server, ca))
}

pub async fn stop(server: RunningServer) -> TestResult {
    server.shutdown();
    tokio::time::timeout(PATIENCE, server.wait()).await??;
    Ok(())
}

// ---------------------------------------------------------------- clients

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Http {
    H1,
    H2,
}

impl Http {
    pub const BOTH: [Http; 2] = [Http::H1, Http::H2];

    fn alpn(self) -> Vec<u8> {
        match self {
            Http::H1 => b"http/1.1".to_vec(),
            Http::H2 => b"h2".to_vec(),
        }
    }
}

pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Trusts `ca_pem`, offers `alpn`, and presents `client` when given.
pub fn tls_config(
    ca_pem: &str,
    alpn: Option<Http>,
    client: Option<&Leaf>,
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> Result<Arc<ClientConfig>, Error> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert?)?;
    }
    let builder = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(versions)?
        .with_root_certificates(roots);
    let mut config = match client {
        Some(leaf) => builder.with_client_auth_cert(
            vec![leaf.der.clone()],
            PrivateKeyDer::from_pem_slice(leaf.key_pem.as_bytes())?,
        )?,
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = alpn.map(|a| vec![a.alpn()]).unwrap_or_default();
    Ok(Arc::new(config))
}

pub fn client_config(ca_pem: &str, http: Http) -> Result<Arc<ClientConfig>, Error> {
    tls_config(ca_pem, Some(http), None, rustls::DEFAULT_VERSIONS)
}

pub async fn tls_connect(
    addr: SocketAddr,
    config: Arc<ClientConfig>,
) -> Result<TlsStream<TcpStream>, Error> {
    tls_connect_from(None, addr, config).await
}

/// A TCP connection to `addr` from `source` (another loopback address than
/// 127.0.0.1 stands for another client), or from the address the kernel
/// picks.
pub async fn tcp_from(source: Option<IpAddr>, addr: SocketAddr) -> std::io::Result<TcpStream> {
    let Some(source) = source else {
        return TcpStream::connect(addr).await;
    };
    let socket = match source {
        IpAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        IpAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
    };
    socket.bind(SocketAddr::new(source, 0))?;
    socket.connect(addr).await
}

pub async fn tls_connect_from(
    source: Option<IpAddr>,
    addr: SocketAddr,
    config: Arc<ClientConfig>,
) -> Result<TlsStream<TcpStream>, Error> {
    let tcp = tcp_from(source, addr).await?;
    tcp.set_nodelay(true)?;
    let stream = tokio::time::timeout(
        PATIENCE,
        TlsConnector::from(config).connect(ServerName::try_from("localhost")?, tcp),
    )
    .await??;
    Ok(stream)
}

/// The leaf certificate the server presents to a new handshake.
pub async fn served_cert(addr: SocketAddr, ca_pem: &str) -> Result<CertificateDer<'static>, Error> {
    let stream = tls_connect(addr, client_config(ca_pem, Http::H1)?).await?;
    let certs = stream
        .get_ref()
        .1
        .peer_certificates()
        .ok_or_else(|| fail("no peer certificate"))?;
    let leaf = certs.first().ok_or_else(|| fail("empty peer chain"))?;
    Ok(leaf.clone().into_owned())
}

enum Sender {
    H1(http1::SendRequest<Body>),
    H2(http2::SendRequest<Body>),
}

/// One TLS connection, speaking the negotiated protocol.
pub struct Client {
    sender: Sender,
}

pub fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into()).boxed()
}

pub fn post(path: &str, content_type: Option<&str>, body: Body) -> Result<Request<Body>, Error> {
    let mut builder = Request::post(format!("https://localhost{path}"));
    if let Some(ct) = content_type {
        builder = builder.header("content-type", ct);
    }
    Ok(builder.body(body)?)
}

impl Client {
    pub async fn connect(addr: SocketAddr, config: Arc<ClientConfig>) -> Result<Self, Error> {
        Self::connect_from(None, addr, config).await
    }

    /// A client connected from `source` (see [`tcp_from`]).
    pub async fn connect_from(
        source: Option<IpAddr>,
        addr: SocketAddr,
        config: Arc<ClientConfig>,
    ) -> Result<Self, Error> {
        let stream = tls_connect_from(source, addr, config).await?;
        let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
        let io = TokioIo::new(stream);
        let sender = if h2 {
            let (sender, conn) = http2::handshake(TokioExecutor::new(), io).await?;
            tokio::spawn(conn);
            Sender::H2(sender)
        } else {
            let (sender, conn) = http1::handshake(io).await?;
            tokio::spawn(conn);
            Sender::H1(sender)
        };
        Ok(Self { sender })
    }

    pub async fn open(addr: SocketAddr, ca_pem: &str, http: Http) -> Result<Self, Error> {
        Self::connect(addr, client_config(ca_pem, http)?).await
    }

    pub async fn send(&mut self, req: Request<Body>) -> Result<Response<Incoming>, Error> {
        let response = match &mut self.sender {
            Sender::H1(s) => {
                s.ready().await?;
                s.send_request(req).await?
            }
            Sender::H2(s) => {
                s.ready().await?;
                s.send_request(req).await?
            }
        };
        Ok(response)
    }

    /// Whether the connection can take another request. False once the
    /// server closed it (HTTP/1 `Connection: close`, HTTP/2 GOAWAY): a real
    /// client then opens a new connection; no request was lost.
    pub async fn ready(&mut self) -> bool {
        match &mut self.sender {
            Sender::H1(s) => s.ready().await.is_ok(),
            Sender::H2(s) => s.ready().await.is_ok(),
        }
    }

    /// Sends and reads the whole answer; `Ok(None)` when the server provably
    /// did not process the request (never sent, or refused by a GOAWAY or
    /// REFUSED_STREAM), which clients retry on a new connection.
    pub async fn call_or_refused(
        &mut self,
        req: Request<Body>,
    ) -> Result<Option<(StatusCode, Bytes)>, Error> {
        let sent = match &mut self.sender {
            Sender::H1(s) => match s.ready().await {
                Ok(()) => s
                    .try_send_request(req)
                    .await
                    .map_err(|e| (e.message().is_none(), e.into_error())),
                Err(_) => return Ok(None),
            },
            Sender::H2(s) => match s.ready().await {
                Ok(()) => s
                    .try_send_request(req)
                    .await
                    .map_err(|e| (e.message().is_none(), e.into_error())),
                Err(_) => return Ok(None),
            },
        };
        let response = match sent {
            Ok(response) => response,
            Err((sent, e)) => {
                // RFC 9113 §6.8: streams above a GOAWAY's last stream id, and
                // streams reset with REFUSED_STREAM, were not processed.
                let h2 = std::error::Error::source(&e).and_then(|s| s.downcast_ref::<h2::Error>());
                let refused = h2.is_some_and(|h2| {
                    (h2.is_go_away() && h2.is_remote() && h2.reason() == Some(h2::Reason::NO_ERROR))
                        || h2.reason() == Some(h2::Reason::REFUSED_STREAM)
                });
                if !sent || refused {
                    return Ok(None);
                }
                return Err(fail(format!("{e}: {h2:?}")));
            }
        };
        let status = response.status();
        let body = tokio::time::timeout(PATIENCE, response.into_body().collect())
            .await??
            .to_bytes();
        Ok(Some((status, body)))
    }

    /// Sends and reads the whole answer.
    pub async fn call(&mut self, req: Request<Body>) -> Result<(StatusCode, Bytes), Error> {
        let response = tokio::time::timeout(PATIENCE, self.send(req)).await??;
        let status = response.status();
        let body = tokio::time::timeout(PATIENCE, response.into_body().collect())
            .await??
            .to_bytes();
        Ok((status, body))
    }

    pub async fn post_json(
        &mut self,
        path: &str,
        body: Vec<u8>,
    ) -> Result<(StatusCode, Bytes), Error> {
        self.call(post(path, Some("application/json"), full(body))?)
            .await
    }
}

/// GET over plain HTTP/1.1 on the admin port, one connection per call.
pub async fn admin_get(addr: SocketAddr, path: &str) -> Result<(StatusCode, String), Error> {
    let tcp = TcpStream::connect(addr).await?;
    let (mut sender, conn) = http1::handshake::<_, Body>(TokioIo::new(tcp)).await?;
    tokio::spawn(conn);
    let req = Request::get(format!("http://{addr}{path}")).body(full(Bytes::new()))?;
    let response = tokio::time::timeout(PATIENCE, sender.send_request(req)).await??;
    let status = response.status();
    let body = response.into_body().collect().await?.to_bytes();
    Ok((status, String::from_utf8(body.to_vec())?))
}

/// A sample's value from the metrics text, by its exact name and labels.
pub fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}

pub async fn metric_now(admin: SocketAddr, series: &str) -> Result<f64, Error> {
    let (_, text) = admin_get(admin, "/metrics").await?;
    metric(&text, series).ok_or_else(|| fail(format!("no series {series} in\n{text}")))
}

/// Writes raw bytes on a fresh TLS connection and reads until the server
/// closes it (or `limit` passes, which is an error).
pub async fn raw_exchange(
    addr: SocketAddr,
    ca_pem: &str,
    request: &[u8],
    limit: Duration,
) -> Result<String, Error> {
    let mut stream = tls_connect(addr, client_config(ca_pem, Http::H1)?).await?;
    stream.write_all(request).await?;
    stream.flush().await?;
    let mut out = Vec::new();
    let read = tokio::time::timeout(limit, async {
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => out.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    if read.is_err() {
        return Err(fail(format!(
            "the server kept the connection open past {limit:?}"
        )));
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

// ---------------------------------------------------------------- fixtures

pub fn repo_path(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)
}

/// Every golden case directory, sorted.
/// The fixtures a webhook can be sent: a `cli-only` case holds a file only
/// a user hands to the CLI (a kubectl dump, a number kubectl would quote).
pub fn fixture_cases() -> Result<Vec<PathBuf>, Error> {
    let mut cases = Vec::new();
    for entry in std::fs::read_dir(repo_path("fixtures"))? {
        let path = entry?.path();
        // A config refused at load serves nothing: the CLI's goldens check
        // the refusal, `config_values_every_pod_would_carry_…` the reload's.
        let served =
            !path.join("cli-only").is_file() && !path.join("expected-config-error.txt").is_file();
        if path.join("input.yaml").is_file() && served {
            cases.push(path);
        }
    }
    cases.sort();
    Ok(cases)
}

/// A case's `args` file: `serve` flags that change its pods (`--modelcar-mode`).
pub fn case_flags(case: &Path) -> Vec<String> {
    std::fs::read_to_string(case.join("args"))
        .map(|text| text.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

pub fn yaml(path: &Path) -> Result<Value, Error> {
    let text =
        std::fs::read_to_string(path).map_err(|e| fail(format!("{}: {e}", path.display())))?;
    kserve_injector_core::reader::documents(&mut text.as_bytes())
        .and_then(|mut docs| docs.next().unwrap_or(Ok(Value::Null)))
        .map_err(|e| fail(format!("{}: {e}", path.display())))
}

#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Pod(Value),
    Denied(String),
}

pub fn golden(case: &Path) -> Result<Outcome, Error> {
    let pod = case.join("expected.yaml");
    if pod.is_file() {
        return Ok(Outcome::Pod(yaml(&pod)?));
    }
    let denial = std::fs::read_to_string(case.join("expected-error.txt"))
        .map_err(|e| fail(format!("{}: no golden: {e}", case.display())))?;
    Ok(Outcome::Denied(denial.trim().to_string()))
}

pub fn review_request(pod: &Value, api_version: &str, uid: &str) -> Result<Vec<u8>, Error> {
    let namespace = pod
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("default");
    Ok(serde_json::to_vec(&json!({
        "apiVersion": api_version,
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": namespace,
            "operation": "CREATE",
            "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller"},
            "object": pod,
            "dryRun": false
        }
    }))?)
}

/// Reads an AdmissionReview response: the patched pod, or the denial.
pub fn apply_response(
    pod: &Value,
    body: &[u8],
    api_version: &str,
    uid: &str,
) -> Result<Outcome, Error> {
    let review: Value = serde_json::from_slice(body)?;
    ensure(review["apiVersion"] == api_version, || {
        format!("apiVersion in {review}")
    })?;
    let response = &review["response"];
    ensure(response["uid"] == uid, || {
        format!("uid not echoed in {review}")
    })?;
    if response["allowed"] != true {
        let message = response["status"]["message"].as_str().unwrap_or_default();
        return Ok(Outcome::Denied(message.to_string()));
    }
    let mut patched = pod.clone();
    if let Some(encoded) = response["patch"].as_str() {
        ensure(response["patchType"] == "JSONPatch", || {
            format!("patchType in {review}")
        })?;
        let bytes = base64::engine::general_purpose::STANDARD.decode(encoded)?;
        let patch: json_patch::Patch = serde_json::from_slice(&bytes)?;
        json_patch::patch(&mut patched, &patch)?;
    }
    Ok(Outcome::Pod(patched))
}

/// The modelcar fixture as a request body: a realistic pod that KServe's
/// default config mutates.
pub fn sample_review() -> Result<(Value, Vec<u8>), Error> {
    let pod = yaml(&repo_path("fixtures/m3-modelcar-oci/input.yaml"))?;
    let body = review_request(&pod, "admission.k8s.io/v1", "sample-uid")?;
    Ok((pod, body))
}

// ---------------------------------------------------------------- load

/// Background traffic for the rotation and drain tests: workers that open a
/// fresh TLS connection per request (so they see every certificate change),
/// and one long-lived HTTP/2 connection (which must survive it).
pub struct Load {
    stop: Arc<std::sync::atomic::AtomicBool>,
    workers: Vec<tokio::task::JoinHandle<(u64, Vec<String>)>>,
}

#[derive(Debug)]
pub struct LoadReport {
    pub ok: u64,
    pub failures: Vec<String>,
}

impl Load {
    pub fn start(addr: SocketAddr, ca_pem: &str, fresh_workers: usize) -> Result<Self, Error> {
        let (_, review) = sample_review()?;
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut workers = Vec::new();
        for i in 0..=fresh_workers {
            let (stop, ca, review) = (stop.clone(), ca_pem.to_string(), review.clone());
            let persistent = i == fresh_workers;
            workers.push(tokio::spawn(async move {
                let (mut ok, mut failures) = (0u64, Vec::new());
                let mut kept: Option<Client> = None;
                let mut n = 0usize;
                while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                    n += 1;
                    let http = if persistent || n.is_multiple_of(2) {
                        Http::H2
                    } else {
                        Http::H1
                    };
                    let result = async {
                        let mut client = match kept.take() {
                            Some(mut c) => {
                                if c.ready().await {
                                    c
                                } else {
                                    Client::open(addr, &ca, http).await?
                                }
                            }
                            None => Client::open(addr, &ca, http).await?,
                        };
                        // A stream the server did not process (refused, or above
                        // a GOAWAY's last stream id, RFC 9113 §6.8) is retried on
                        // a new connection, as the API server's HTTP/2 client does.
                        let mut refused = 0;
                        let (status, body) = loop {
                            let body = full(Bytes::from(review.clone()));
                            let req = post("/mutate-pods", Some("application/json"), body)?;
                            match client.call_or_refused(req).await? {
                                Some(answer) => break answer,
                                None if refused < 3 => {
                                    refused += 1;
                                    client = Client::open(addr, &ca, http).await?;
                                }
                                None => return Err(fail("refused three times")),
                            }
                        };
                        if persistent {
                            kept = Some(client);
                        }
                        ensure(status == StatusCode::OK, || {
                            format!("HTTP {status}: {body:?}")
                        })
                    }
                    .await;
                    match result {
                        Ok(()) => ok += 1,
                        Err(e) => failures.push(format!("{http:?} request {n}: {e}")),
                    }
                }
                (ok, failures)
            }));
        }
        Ok(Self { stop, workers })
    }

    pub async fn finish(self) -> Result<LoadReport, Error> {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let mut report = LoadReport {
            ok: 0,
            failures: Vec::new(),
        };
        for worker in self.workers {
            let (ok, failures) = tokio::time::timeout(PATIENCE, worker).await??;
            report.ok += ok;
            report.failures.extend(failures);
        }
        Ok(report)
    }
}
