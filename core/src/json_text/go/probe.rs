//! A `corev1.Probe` as Go's `encoding/json` `Marshal` writes it: KServe's
//! `InjectAgent` (`pkg/webhook/admission/pod/agent_injector.go`, v0.15.0
//! to HEAD) puts the user's readiness probe, so marshalled, into the
//! agent's `SERVING_READINESS_PROBE` variable. Go's field order is the
//! struct's (the embedded `ProbeHandler` first), and a field tagged
//! `omitempty` ([`super::tags`]) that holds its zero value is left out;
//! k8s-openapi's `Serialize` writes neither, hence by hand.

use super::tags::{omitempty, GoType};
use super::write_str;
use crate::json_text::write_int;
use k8s_openapi::api::core::v1::{ExecAction, GRPCAction, HTTPGetAction, Probe, TCPSocketAction};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// The bytes Go's `json.Marshal` gives `p`.
pub(crate) fn probe_json(p: &Probe) -> String {
    let mut out = String::with_capacity(128);
    let mut o = Object::open(&mut out, GoType::Probe);
    if let Some(exec) = &p.exec {
        exec_json(o.key("exec"), exec);
    }
    if let Some(http) = &p.http_get {
        http_get_json(o.key("httpGet"), http);
    }
    if let Some(tcp) = &p.tcp_socket {
        tcp_socket_json(o.key("tcpSocket"), tcp);
    }
    if let Some(grpc) = &p.grpc {
        grpc_json(o.key("grpc"), grpc);
    }
    o.int("initialDelaySeconds", p.initial_delay_seconds);
    o.int("timeoutSeconds", p.timeout_seconds);
    o.int("periodSeconds", p.period_seconds);
    o.int("successThreshold", p.success_threshold);
    o.int("failureThreshold", p.failure_threshold);
    // A pointer field: omitempty drops only nil, so Some(0) is written.
    if let Some(grace) = p.termination_grace_period_seconds {
        write_int(o.key("terminationGracePeriodSeconds"), grace);
    }
    o.close();
    out
}

fn exec_json(out: &mut String, exec: &ExecAction) {
    let mut o = Object::open(out, GoType::Exec);
    let command = exec.command.as_deref().unwrap_or_default();
    if !o.omits("command", command.is_empty()) {
        let out = o.key("command");
        out.push('[');
        for (i, arg) in command.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            write_str(out, arg);
        }
        out.push(']');
    }
    o.close();
}

fn http_get_json(out: &mut String, http: &HTTPGetAction) {
    let mut o = Object::open(out, GoType::HttpGet);
    o.string("path", http.path.as_deref());
    int_or_string(o.key("port"), &http.port);
    o.string("host", http.host.as_deref());
    o.string("scheme", http.scheme.as_deref());
    let headers = http.http_headers.as_deref().unwrap_or_default();
    if !o.omits("httpHeaders", headers.is_empty()) {
        let out = o.key("httpHeaders");
        out.push('[');
        for (i, h) in headers.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let mut header = Object::open(out, GoType::HttpHeader);
            header.string("name", Some(&h.name));
            header.string("value", Some(&h.value));
            header.close();
        }
        out.push(']');
    }
    o.close();
}

fn tcp_socket_json(out: &mut String, tcp: &TCPSocketAction) {
    let mut o = Object::open(out, GoType::TcpSocket);
    int_or_string(o.key("port"), &tcp.port);
    o.string("host", tcp.host.as_deref());
    o.close();
}

fn grpc_json(out: &mut String, grpc: &GRPCAction) {
    let mut o = Object::open(out, GoType::Grpc);
    o.int("port", Some(grpc.port));
    // `service` is a *string: nil is left out, an empty string written.
    if let Some(service) = &grpc.service {
        write_str(o.key("service"), service);
    }
    o.close();
}

fn int_or_string(out: &mut String, v: &IntOrString) {
    match v {
        IntOrString::Int(i) => write_int(out, *i),
        IntOrString::String(s) => write_str(out, s),
    }
}

/// A JSON object of Go type `ty` being written, and whether its next
/// field is the first.
struct Object<'o> {
    out: &'o mut String,
    ty: GoType,
    first: bool,
}

impl<'o> Object<'o> {
    fn open(out: &'o mut String, ty: GoType) -> Self {
        out.push('{');
        Object {
            out,
            ty,
            first: true,
        }
    }

    /// Whether `Marshal` leaves `field` out: tagged `omitempty` and `zero`.
    fn omits(&self, field: &str, zero: bool) -> bool {
        zero && omitempty(self.ty, field)
    }

    /// Writes `"key":` (`key` is an ASCII literal with nothing to escape)
    /// and returns the buffer, for the value.
    fn key(&mut self, key: &str) -> &mut String {
        if !std::mem::replace(&mut self.first, false) {
            self.out.push(',');
        }
        self.out.push('"');
        self.out.push_str(key);
        self.out.push_str("\":");
        self.out
    }

    /// A `string` field (not a pointer: `None` is Go's `""`).
    fn string(&mut self, key: &str, value: Option<&str>) {
        let value = value.unwrap_or_default();
        if !self.omits(key, value.is_empty()) {
            write_str(self.key(key), value);
        }
    }

    /// An `int32` field (not a pointer: `None` is Go's 0).
    fn int(&mut self, key: &str, value: Option<i32>) {
        let value = value.unwrap_or_default();
        if !self.omits(key, value == 0) {
            write_int(self.key(key), value);
        }
    }

    fn close(self) {
        self.out.push('}');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::HTTPHeader;

    fn thresholds(p: Probe) -> Probe {
        Probe {
            timeout_seconds: Some(1),
            period_seconds: Some(10),
            success_threshold: Some(1),
            failure_threshold: Some(3),
            ..p
        }
    }

    fn tcp(port: IntOrString) -> Option<TCPSocketAction> {
        Some(TCPSocketAction { port, host: None })
    }

    #[test]
    fn tcp_probe() {
        let p = thresholds(Probe {
            tcp_socket: tcp(IntOrString::Int(8080)),
            ..Probe::default()
        });
        assert_eq!(
            probe_json(&p),
            r#"{"tcpSocket":{"port":8080},"timeoutSeconds":1,"periodSeconds":10,"successThreshold":1,"failureThreshold":3}"#
        );
    }

    #[test]
    fn http_probe() {
        let p = thresholds(Probe {
            http_get: Some(HTTPGetAction {
                path: Some("/v1/health/ready".into()),
                port: IntOrString::Int(8080),
                scheme: Some("HTTP".into()),
                ..HTTPGetAction::default()
            }),
            ..Probe::default()
        });
        assert_eq!(
            probe_json(&p),
            r#"{"httpGet":{"path":"/v1/health/ready","port":8080,"scheme":"HTTP"},"timeoutSeconds":1,"periodSeconds":10,"successThreshold":1,"failureThreshold":3}"#
        );
    }

    #[test]
    fn zero_values_are_omitted() {
        let p = Probe {
            tcp_socket: Some(TCPSocketAction {
                port: IntOrString::Int(8080),
                host: Some(String::new()),
            }),
            initial_delay_seconds: Some(0),
            timeout_seconds: Some(0),
            period_seconds: Some(0),
            success_threshold: Some(0),
            failure_threshold: Some(0),
            ..Probe::default()
        };
        assert_eq!(probe_json(&p), r#"{"tcpSocket":{"port":8080}}"#);
        assert_eq!(probe_json(&Probe::default()), "{}");
    }

    #[test]
    fn named_port_and_host() {
        let p = Probe {
            tcp_socket: Some(TCPSocketAction {
                port: IntOrString::String("http".into()),
                host: Some("10.0.0.1".into()),
            }),
            initial_delay_seconds: Some(5),
            ..Probe::default()
        };
        assert_eq!(
            probe_json(&p),
            r#"{"tcpSocket":{"port":"http","host":"10.0.0.1"},"initialDelaySeconds":5}"#
        );
    }

    #[test]
    fn http_headers_and_escaping() {
        let p = Probe {
            http_get: Some(HTTPGetAction {
                path: Some("/health?a=1&b=<2>".into()),
                port: IntOrString::String("admin".into()),
                host: Some("example.com".into()),
                scheme: Some("HTTPS".into()),
                http_headers: Some(vec![
                    HTTPHeader {
                        name: "X-Custom".into(),
                        value: String::new(),
                    },
                    HTTPHeader {
                        name: "Quote".into(),
                        value: "a\"b\\c".into(),
                    },
                ]),
            }),
            ..Probe::default()
        };
        assert_eq!(
            probe_json(&p),
            concat!(
                r#"{"httpGet":{"path":"/health?a=1\u0026b=\u003c2\u003e","port":"admin","host":"example.com","#,
                r#""scheme":"HTTPS","httpHeaders":[{"name":"X-Custom","value":""},{"name":"Quote","value":"a\"b\\c"}]}}"#
            )
        );
    }

    #[test]
    fn empty_headers_are_omitted() {
        let p = Probe {
            http_get: Some(HTTPGetAction {
                port: IntOrString::Int(80),
                http_headers: Some(vec![]),
                ..HTTPGetAction::default()
            }),
            ..Probe::default()
        };
        assert_eq!(probe_json(&p), r#"{"httpGet":{"port":80}}"#);
    }

    #[test]
    fn exec_probe_and_grace_period() {
        let p = Probe {
            exec: Some(ExecAction {
                command: Some(vec![
                    "sh".into(),
                    "-c".into(),
                    "test -f /tmp/ready && exit 0".into(),
                ]),
            }),
            termination_grace_period_seconds: Some(0),
            ..Probe::default()
        };
        assert_eq!(
            probe_json(&p),
            r#"{"exec":{"command":["sh","-c","test -f /tmp/ready \u0026\u0026 exit 0"]},"terminationGracePeriodSeconds":0}"#
        );
        let empty = Probe {
            exec: Some(ExecAction {
                command: Some(vec![]),
            }),
            ..Probe::default()
        };
        assert_eq!(probe_json(&empty), r#"{"exec":{}}"#);
    }

    #[test]
    fn grpc_probe() {
        let p = Probe {
            grpc: Some(GRPCAction {
                port: 0,
                service: Some(String::new()),
            }),
            ..Probe::default()
        };
        assert_eq!(probe_json(&p), r#"{"grpc":{"port":0,"service":""}}"#);
        let p = Probe {
            grpc: Some(GRPCAction {
                port: 9000,
                service: None,
            }),
            period_seconds: Some(2),
            ..Probe::default()
        };
        assert_eq!(
            probe_json(&p),
            r#"{"grpc":{"port":9000},"periodSeconds":2}"#
        );
    }
}
