//! The kube-apiserver harness shared by the end-to-end tests: a real
//! kube-apiserver (1.36, or 1.31 for the tests that also run on the oldest
//! version we claim) + etcd on loopback, started and stopped by the scripts
//! in `tests/e2e/apiserver/` with this suite's own ports, work dir and token
//! users, and helpers to apply manifests and wait. Each start names the
//! version in `cargo test`'s output. Without the binaries (`bash
//! .ci/e2e.sh` builds them) a test passes as not run after a line in
//! `cargo test`'s own output says so, except under `CI=true`, where it
//! fails.
#![allow(dead_code)] // Each test binary uses part of it.

use crate::ports;
use kserve_injector::lookups::{resolve_client, KubeEnvironment, LookupMode};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::{Api, Client};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

pub const NS: &str = "e2e";
pub const INJECTOR_TOKEN: &str = "e2e-injector-token";
pub const NOBODY_TOKEN: &str = "e2e-nobody-token";
/// A user bound to nothing but the audit ClusterRole (`manifests/audit`).
pub const AUDITOR_TOKEN: &str = "e2e-auditor-token";
pub const AUDITOR: &str = "e2e-auditor";

/// The Kubernetes versions the suite runs against, each its own build of
/// kube-apiserver (`tests/e2e/apiserver/build.sh 1.36|1.31`): every test on
/// the newest, the ones that read or write what changed between versions
/// also on the oldest the README claims.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kube {
    V1_36,
    V1_31,
}

impl Kube {
    /// `1.36`: the argument of `build.sh`, the cache directory's suffix.
    pub fn minor(self) -> &'static str {
        match self {
            Kube::V1_36 => "1.36",
            Kube::V1_31 => "1.31",
        }
    }

    /// `$BIN_DIR_1_36` (or `_1_31`), else `~/.cache/kube-apiserver-1.36/bin`,
    /// where `build.sh` puts the version's kube-apiserver, etcd and kubectl.
    pub fn bin_dir(self) -> PathBuf {
        let var = format!("BIN_DIR_{}", self.minor().replace('.', "_"));
        std::env::var_os(var).map(PathBuf::from).unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                .join(format!(".cache/kube-apiserver-{}/bin", self.minor()))
        })
    }
}

/// The harness scripts with this test's own ports and work dir, so another
/// user of the same scripts on the machine is not disturbed.
pub struct ApiServer {
    pub kube: Kube,
    pub tools: PathBuf,
    pub work_dir: PathBuf,
    pub port: u16,
    pub etcd: u16,
    /// The admission plugins turned off (`ServiceAccount`: no controller
    /// creates the ServiceAccounts it requires; empty: every default on).
    pub disable_admission: &'static str,
}

impl ApiServer {
    /// A kube-apiserver 1.36 in `work_dir`-1.36 on ports of its own (see
    /// [`ports`]).
    pub fn new(work_dir: &str) -> Self {
        Self::on(Kube::V1_36, work_dir)
    }

    /// A kube-apiserver of version `kube` in `work_dir`-<minor>.
    pub fn on(kube: Kube, work_dir: &str) -> Self {
        let tools = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/apiserver");
        Self {
            kube,
            tools,
            work_dir: format!("{work_dir}-{}", kube.minor()).into(),
            port: ports::port(),
            etcd: ports::reserve(2),
            disable_admission: "ServiceAccount",
        }
    }

    pub fn bin_dir(&self) -> PathBuf {
        self.kube.bin_dir()
    }

    /// `None` when everything is present, else what is missing.
    pub fn missing(&self) -> Option<String> {
        let bin = self.bin_dir();
        for b in ["etcd", "kube-apiserver"] {
            if !bin.join(b).is_file() {
                return Some(format!("no {}", bin.join(b).display()));
            }
        }
        // What start.sh runs besides them.
        let path = std::env::var_os("PATH").unwrap_or_default();
        for tool in ["openssl", "curl"] {
            if !std::env::split_paths(&path).any(|dir| dir.join(tool).is_file()) {
                return Some(format!("no {tool} on PATH"));
            }
        }
        None
    }

    /// The token users, and `$E2E_APISERVER_ARGS` (such as
    /// `--feature-gates=...`, to see a test fail where a feature is off).
    fn extra_args(&self, tokens: &Path) -> String {
        let mut args = format!("--token-auth-file={}", tokens.display());
        if let Ok(more) = std::env::var("E2E_APISERVER_ARGS") {
            args = format!("{args} {more}");
        }
        args
    }

    pub fn script(&self, args: &[&str]) -> String {
        let tokens = self.work_dir.join("tokens.csv");
        let out = Command::new("bash")
            .args(args)
            .current_dir(&self.tools)
            .env("BIN_DIR", self.bin_dir())
            .env("WORK_DIR", &self.work_dir)
            .env("APISERVER_PORT", self.port.to_string())
            .env("ETCD_CLIENT_PORT", self.etcd.to_string())
            .env("ETCD_PEER_PORT", (self.etcd + 1).to_string())
            .env("APISERVER_EXTRA_ARGS", self.extra_args(&tokens))
            .env("DISABLE_ADMISSION", self.disable_admission)
            .output()
            .expect("bash runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{args:?} failed: {stderr}");
        eprintln!("{stderr}");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Starts from a clean work dir; returns the admin kubeconfig.
    pub fn start_clean(&self) -> PathBuf {
        self.script(&["stop.sh", "--clean"]);
        std::fs::create_dir_all(&self.work_dir).unwrap();
        // The webhook's ServiceAccount identity (as its mounted token would
        // authenticate), a user no role binds, and the audit's user.
        std::fs::write(
            self.work_dir.join("tokens.csv"),
            format!("{INJECTOR_TOKEN},system:serviceaccount:kserve:kserve-injector,uid-injector\n{NOBODY_TOKEN},e2e-nobody,uid-nobody\n{AUDITOR_TOKEN},{AUDITOR},uid-auditor\n"),
        )
        .unwrap();
        self.start()
    }

    /// Starts the server (again); returns the admin kubeconfig. Says which
    /// version runs for which test in `cargo test`'s own output.
    pub fn start(&self) -> PathBuf {
        let kubeconfig = self.script(&["start.sh"]).lines().last().unwrap().into();
        // `Kubernetes v1.36.2`
        let version = Command::new(self.bin_dir().join("kube-apiserver"))
            .arg("--version")
            .output()
            .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_string())
            .unwrap_or_default();
        let version = version.trim_start_matches("Kubernetes ");
        let test = std::thread::current().name().unwrap_or("e2e").to_string();
        say(&format!("e2e: {test} against kube-apiserver {version}"));
        kubeconfig
    }

    /// A kubeconfig authenticating with `token`.
    pub fn token_kubeconfig(&self, name: &str, token: &str) -> PathBuf {
        let path = self.work_dir.join(format!("{name}.kubeconfig"));
        let ca = self.work_dir.join("pki/ca.crt");
        std::fs::write(
            &path,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: local\n  cluster:\n    server: https://127.0.0.1:{}\n    certificate-authority: {}\nusers:\n- name: {name}\n  user:\n    token: {token}\ncontexts:\n- name: {name}\n  context: {{cluster: local, user: {name}}}\ncurrent-context: {name}\n",
                self.port,
                ca.display()
            ),
        )
        .unwrap();
        path
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        if self.tools.join("stop.sh").is_file() && self.work_dir.exists() {
            // Quietly: its "stopped" lines would land among cargo test's own.
            let _ = Command::new("bash")
                .args(["stop.sh", "--clean"])
                .current_dir(&self.tools)
                .env("WORK_DIR", &self.work_dir)
                .stderr(std::process::Stdio::null())
                .status();
        }
    }
}

pub async fn client(kubeconfig: &Path) -> Client {
    let env = KubeEnvironment {
        kubeconfig_flag: Some(kubeconfig.to_path_buf()),
        ..KubeEnvironment::default()
    };
    resolve_client(LookupMode::On, &env, None)
        .await
        .expect("the API server answers")
        .expect("lookups are on")
}

/// The documents of a YAML text (empty and `null` ones skipped), read by
/// the core's reader.
pub fn yaml_docs(text: &str) -> Vec<serde_json::Value> {
    kserve_injector_core::reader::documents(&mut text.as_bytes())
        .and_then(|docs| docs.collect())
        .expect("YAML")
}

/// Creates every document (an existing object is left as it is); retries
/// while a just-created CRD is not served yet.
pub async fn apply(admin: &Client, text: &str) {
    for value in yaml_docs(text) {
        let obj: DynamicObject = serde_json::from_value(value).unwrap();
        let gvk = GroupVersionKind::try_from(obj.types.as_ref().unwrap()).unwrap();
        let resource = ApiResource::from_gvk(&gvk);
        let api: Api<DynamicObject> = match &obj.metadata.namespace {
            Some(ns) => Api::namespaced_with(admin.clone(), ns, &resource),
            None => Api::all_with(admin.clone(), &resource),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match api.create(&PostParams::default(), &obj).await {
                Ok(_) => break,
                Err(kube::Error::Api(s)) if s.code == 409 => break,
                Err(kube::Error::Api(s)) if s.code == 404 && Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(100)).await
                }
                Err(e) => panic!("creating {:?} {:?}: {e}", gvk.kind, obj.metadata.name),
            }
        }
    }
}

/// KServe's CRDs, the shipped ClusterRole and binding, then `objects`
/// (a path under the crate root).
pub async fn apply_cluster(admin: &Client, objects: &str) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let read = |p: &str| std::fs::read_to_string(root.join(p)).unwrap();
    apply(admin, &read("tests/e2e/crds.yaml")).await;
    apply(admin, &read("manifests/rbac/cluster-role.yaml")).await;
    apply(admin, &read(objects)).await;
}

/// Retries `attempt` until it gives a value or `limit` passes (then `None`).
pub async fn eventually_or<T, F, Fut>(limit: Duration, mut attempt: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + limit;
    loop {
        if let Some(found) = attempt().await {
            return Some(found);
        }
        if Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub async fn eventually<T, F, Fut>(what: &str, limit: Duration, attempt: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    match eventually_or(limit, attempt).await {
        Some(found) => found,
        None => panic!("timed out after {limit:?}: {what}"),
    }
}

/// The command that provides what the end-to-end tests run against.
pub const PROVIDE: &str = "bash .ci/e2e.sh";

/// False (after saying why) when the test cannot run; panics under
/// `CI=true`, where a test that did not run is a failure.
pub fn present(server: &ApiServer) -> bool {
    let Some(missing) = server.missing() else {
        return true;
    };
    let how = format!(
        "the end-to-end tests (tests/e2e) need kube-apiserver {minor} and etcd ({missing}): `{PROVIDE} {minor}` builds them (about 8 CPU minutes, once)",
        minor = server.kube.minor()
    );
    assert!(std::env::var("CI").as_deref() != Ok("true"), "{how}");
    announce_not_run(server.kube, &how);
    false
}

/// Says once per run and version, in `cargo test`'s own output, that these
/// tests did not run.
fn announce_not_run(kube: Kube, how: &str) {
    static SAID: std::sync::Mutex<Vec<Kube>> = std::sync::Mutex::new(Vec::new());
    let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
    if !said.contains(&kube) {
        said.push(kube);
        say(&format!(
            "\nNOT RUN: {how}; they pass here as not run (under CI=true they fail)\n"
        ));
    }
    eprintln!("not run: {how}");
}

/// A line in `cargo test`'s own output, between its `test … ok` lines.
/// libtest keeps what `eprintln!` prints for a failure's report (it shows
/// only with `--nocapture`); a write to the stderr handle itself is not
/// captured.
fn say(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

pub fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    (status.lines())
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Applies the ClusterRole patch (JSON patch ops) of the kustomize component
/// `component` (a directory under the crate root) to the shipped
/// ClusterRole, and stores the resulting rules: the role that component
/// gives, through the component's own patch.
pub async fn patch_cluster_role(admin: &Client, component: &str) {
    use serde_json::Value;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let read = |p: &str| std::fs::read_to_string(root.join(p)).expect(p);
    let kustomization = read(&format!("{component}/kustomization.yaml"));
    let kustomization = yaml_docs(&kustomization).remove(0);
    let ops = (kustomization["patches"].as_array().expect("patches").iter())
        .find(|p| p["target"]["kind"] == "ClusterRole")
        .and_then(|p| p["patch"].as_str())
        .expect("a ClusterRole patch");
    let ops: json_patch::Patch =
        serde_json::from_value(yaml_docs(ops).remove(0)).expect("a JSON patch");
    let roles = read("manifests/rbac/cluster-role.yaml");
    let mut role: Value = (yaml_docs(&roles).into_iter())
        .find(|d: &Value| d["kind"] == "ClusterRole")
        .expect("the ClusterRole");
    json_patch::patch(&mut role, &ops).expect("the patch applies to the shipped role");
    let api: Api<k8s_openapi::api::rbac::v1::ClusterRole> = Api::all(admin.clone());
    let rules = serde_json::json!({"rules": role["rules"]});
    let params = kube::api::PatchParams::default();
    api.patch(
        "kserve-injector-lookups",
        &params,
        &kube::api::Patch::Merge(&rules),
    )
    .await
    .expect("the role is patched");
}

impl ApiServer {
    /// Kills kube-apiserver alone (SIGKILL, as a crashed or evicted
    /// control-plane pod; etcd and its data stay) and returns its command
    /// line once it has exited, for [`start_apiserver`](Self::start_apiserver).
    pub async fn kill_apiserver(&self) -> Vec<String> {
        let pid_file = self.work_dir.join("pids/kube-apiserver.pid");
        let pid = std::fs::read_to_string(&pid_file).expect("the API server's pid");
        let pid = pid.trim().to_string();
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).expect("its command line");
        let args = (cmdline.split(|b| *b == 0))
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let _ = Command::new("kill").args(["-KILL", &pid]).status();
        while std::path::Path::new(&format!("/proc/{pid}")).exists() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        args
    }

    /// Starts kube-apiserver again with `args` (from
    /// [`kill_apiserver`](Self::kill_apiserver)); returns when its
    /// `/readyz` is ok.
    pub async fn start_apiserver(&self, args: &[String], admin: &Client) {
        let log = self.work_dir.join("logs/kube-apiserver.log");
        let log = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(log)
            .expect("the API server's log");
        let child = Command::new(&args[0])
            .args(&args[1..])
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("kube-apiserver starts again");
        let pid_file = self.work_dir.join("pids/kube-apiserver.pid");
        std::fs::write(&pid_file, child.id().to_string()).expect("pid file");
        // stop.sh kills it by the pid file; nothing here waits for it.
        std::mem::forget(child);
        let ready = eventually_or(Duration::from_secs(120), || async {
            let raw = admin.request_text(hyper::Request::get("/readyz").body(vec![]).unwrap());
            (raw.await.ok()? == "ok").then_some(())
        });
        assert!(
            ready.await.is_some(),
            "kube-apiserver not ready again in 120 s"
        );
    }
}

/// A memory cgroup of its own under this process's (v2, else v1), with a
/// limit and no swap, that a child is started in; removed when dropped.
pub struct MemoryCgroup {
    pub path: PathBuf,
    v2: bool,
}

impl MemoryCgroup {
    /// `Err` says why none could be made (not root, no memory controller).
    pub fn new(limit: u64) -> Result<Self, String> {
        let own = std::fs::read_to_string("/proc/self/cgroup").map_err(|e| e.to_string())?;
        let path_of = |want: &dyn Fn(&str) -> bool| {
            own.lines().find_map(|l| {
                let mut parts = l.splitn(3, ':');
                let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
                want(controllers).then(|| path.to_string())
            })
        };
        let mut candidates = Vec::new();
        let unified = Path::new("/sys/fs/cgroup/cgroup.controllers");
        if let (true, Some(p)) = (unified.exists(), path_of(&|c: &str| c.is_empty())) {
            candidates.push((true, format!("/sys/fs/cgroup{p}")));
        }
        if let Some(p) = path_of(&|c: &str| c.split(',').any(|x| x == "memory")) {
            candidates.push((false, format!("/sys/fs/cgroup/memory{p}")));
        }
        let mut why = "no memory cgroup controller is mounted".to_string();
        for (v2, parent) in candidates {
            if v2 {
                let controllers = std::fs::read_to_string(format!("{parent}/cgroup.controllers"))
                    .unwrap_or_default();
                if !controllers.split_whitespace().any(|c| c == "memory") {
                    why = format!("{parent}: the memory controller is not enabled");
                    continue;
                }
            }
            // One per test: tests of one process run side by side.
            static MADE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
            let n = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let path = PathBuf::from(format!(
                "{parent}/kserve-injector-e2e-{}-{n}",
                std::process::id()
            ));
            let made = std::fs::create_dir(&path).and_then(|()| {
                let (file, swap) = match v2 {
                    true => ("memory.max", Some("memory.swap.max")),
                    false => ("memory.limit_in_bytes", None),
                };
                std::fs::write(path.join(file), limit.to_string())?;
                swap.map_or(Ok(()), |s| std::fs::write(path.join(s), "0"))
            });
            match made {
                Ok(()) => return Ok(Self { path, v2 }),
                Err(e) => {
                    why = format!("cannot create a memory cgroup under {parent}: {e}");
                    let _ = std::fs::remove_dir(&path);
                }
            }
        }
        Err(why)
    }

    /// `program args…`, moved into this cgroup before it runs.
    pub fn command(&self, program: &Path) -> Command {
        let mut command = Command::new("sh");
        let procs = self.path.join("cgroup.procs");
        command
            .arg("-c")
            .arg(format!("echo $$ > {} && exec \"$@\"", procs.display()))
            .arg("sh")
            .arg(program);
        command
    }

    fn read(&self, file: &str) -> Option<String> {
        std::fs::read_to_string(self.path.join(file)).ok()
    }

    /// OOM kills in this cgroup so far.
    pub fn oom_kills(&self) -> u64 {
        let file = if self.v2 {
            "memory.events"
        } else {
            "memory.oom_control"
        };
        (self.read(file).unwrap_or_default().lines())
            .find_map(|l| l.strip_prefix("oom_kill "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    }

    /// The cgroup's memory now.
    pub fn usage(&self) -> u64 {
        let file = if self.v2 {
            "memory.current"
        } else {
            "memory.usage_in_bytes"
        };
        (self.read(file).and_then(|v| v.trim().parse().ok())).unwrap_or(0)
    }

    /// The cgroup's highest memory so far, where the kernel keeps it
    /// (v1 `memory.max_usage_in_bytes`, v2 `memory.peak`).
    pub fn peak(&self) -> Option<u64> {
        let file = if self.v2 {
            "memory.peak"
        } else {
            "memory.max_usage_in_bytes"
        };
        self.read(file).and_then(|v| v.trim().parse().ok())
    }
}

impl Drop for MemoryCgroup {
    fn drop(&mut self) {
        for _ in 0..50 {
            if std::fs::remove_dir(&self.path).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}
