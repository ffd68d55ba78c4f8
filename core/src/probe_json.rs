//! Go `encoding/json` serialization of a core/v1 Probe (and of a string map), byte for byte.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ExecAction, GRPCAction, HTTPGetAction, Probe, TCPSocketAction};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// The exact bytes Go's json.Marshal produces for a corev1.Probe.
pub(crate) fn go_probe_json(p: &Probe) -> String {
    let mut o = Object::new();
    // Field order follows the Go struct: the embedded ProbeHandler comes first.
    if let Some(exec) = &p.exec {
        o.raw("exec", &exec_json(exec));
    }
    if let Some(http) = &p.http_get {
        o.raw("httpGet", &http_get_json(http));
    }
    if let Some(tcp) = &p.tcp_socket {
        o.raw("tcpSocket", &tcp_socket_json(tcp));
    }
    if let Some(grpc) = &p.grpc {
        o.raw("grpc", &grpc_json(grpc));
    }
    o.int("initialDelaySeconds", p.initial_delay_seconds);
    o.int("timeoutSeconds", p.timeout_seconds);
    o.int("periodSeconds", p.period_seconds);
    o.int("successThreshold", p.success_threshold);
    o.int("failureThreshold", p.failure_threshold);
    // A pointer field: omitempty drops only nil, so Some(0) is emitted.
    if let Some(grace) = p.termination_grace_period_seconds {
        o.raw("terminationGracePeriodSeconds", &grace.to_string());
    }
    o.finish()
}

/// The exact bytes Go's json.Marshal produces for a non-nil `map[string]string`.
pub(crate) fn go_string_map(m: &BTreeMap<String, String>) -> String {
    // BTreeMap iterates in byte order, which is the order Go sorts map keys in.
    let items: Vec<String> = m
        .iter()
        .map(|(k, v)| format!("{}:{}", quote(k), quote(v)))
        .collect();
    format!("{{{}}}", items.join(","))
}

fn exec_json(exec: &ExecAction) -> String {
    let mut o = Object::new();
    if let Some(command) = exec.command.as_ref().filter(|c| !c.is_empty()) {
        let items: Vec<String> = command.iter().map(|s| quote(s)).collect();
        o.raw("command", &format!("[{}]", items.join(",")));
    }
    o.finish()
}

fn http_get_json(http: &HTTPGetAction) -> String {
    let mut o = Object::new();
    o.string("path", http.path.as_deref());
    o.raw("port", &int_or_string(&http.port));
    o.string("host", http.host.as_deref());
    o.string("scheme", http.scheme.as_deref());
    if let Some(headers) = http.http_headers.as_ref().filter(|h| !h.is_empty()) {
        let items: Vec<String> = headers
            .iter()
            .map(|h| {
                let mut header = Object::new();
                header.raw("name", &quote(&h.name));
                header.raw("value", &quote(&h.value));
                header.finish()
            })
            .collect();
        o.raw("httpHeaders", &format!("[{}]", items.join(",")));
    }
    o.finish()
}

fn tcp_socket_json(tcp: &TCPSocketAction) -> String {
    let mut o = Object::new();
    o.raw("port", &int_or_string(&tcp.port));
    o.string("host", tcp.host.as_deref());
    o.finish()
}

fn grpc_json(grpc: &GRPCAction) -> String {
    let mut o = Object::new();
    o.raw("port", &grpc.port.to_string());
    // `service` is a *string, so an empty string still counts as set.
    if let Some(service) = &grpc.service {
        o.raw("service", &quote(service));
    }
    o.finish()
}

fn int_or_string(v: &IntOrString) -> String {
    match v {
        IntOrString::Int(i) => i.to_string(),
        IntOrString::String(s) => quote(s),
    }
}

/// Builds a JSON object; keys are trusted ASCII literals.
struct Object(String);

impl Object {
    fn new() -> Self {
        Object(String::from("{"))
    }

    fn raw(&mut self, key: &str, value: &str) {
        if self.0.len() > 1 {
            self.0.push(',');
        }
        self.0.push('"');
        self.0.push_str(key);
        self.0.push_str("\":");
        self.0.push_str(value);
    }

    /// A `string` field with `omitempty`.
    fn string(&mut self, key: &str, value: Option<&str>) {
        if let Some(v) = value.filter(|v| !v.is_empty()) {
            self.raw(key, &quote(v));
        }
    }

    /// An `int32` field with `omitempty`.
    fn int(&mut self, key: &str, value: Option<i32>) {
        if let Some(v) = value.filter(|&v| v != 0) {
            self.raw(key, &v.to_string());
        }
    }

    fn finish(mut self) -> String {
        self.0.push('}');
        self.0
    }
}

/// Quotes like Go's encoder with its default HTML escaping (Go >= 1.22 writes \b and \f).
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' | '\0'..='\u{1f}' => {
                out.push_str(&format!("\\u{:04x}", u32::from(c)));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
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
            go_probe_json(&p),
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
            go_probe_json(&p),
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
        assert_eq!(go_probe_json(&p), r#"{"tcpSocket":{"port":8080}}"#);
        assert_eq!(go_probe_json(&Probe::default()), "{}");
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
            go_probe_json(&p),
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
            go_probe_json(&p),
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
        assert_eq!(go_probe_json(&p), r#"{"httpGet":{"port":80}}"#);
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
            go_probe_json(&p),
            r#"{"exec":{"command":["sh","-c","test -f /tmp/ready \u0026\u0026 exit 0"]},"terminationGracePeriodSeconds":0}"#
        );
        let empty = Probe {
            exec: Some(ExecAction {
                command: Some(vec![]),
            }),
            ..Probe::default()
        };
        assert_eq!(go_probe_json(&empty), r#"{"exec":{}}"#);
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
        assert_eq!(go_probe_json(&p), r#"{"grpc":{"port":0,"service":""}}"#);
        let p = Probe {
            grpc: Some(GRPCAction {
                port: 9000,
                service: None,
            }),
            period_seconds: Some(2),
            ..Probe::default()
        };
        assert_eq!(
            go_probe_json(&p),
            r#"{"grpc":{"port":9000},"periodSeconds":2}"#
        );
    }

    #[test]
    fn string_map() {
        let m: BTreeMap<String, String> =
            [("type", "s3"), ("bucket", "a&b"), ("Z", ""), ("<k>", "v")]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
        assert_eq!(
            go_string_map(&m),
            r#"{"\u003ck\u003e":"v","Z":"","bucket":"a\u0026b","type":"s3"}"#
        );
        assert_eq!(go_string_map(&BTreeMap::new()), "{}");
    }

    #[test]
    fn string_escaping() {
        assert_eq!(
            quote("\"\\\n\r\t\u{8}\u{c}\u{0}\u{1f}\u{7f}<>&\u{2028}\u{2029}é😀/"),
            "\"\\\"\\\\\\n\\r\\t\\b\\f\\u0000\\u001f\u{7f}\\u003c\\u003e\\u0026\\u2028\\u2029é😀/\""
        );
    }
}
