//! Go's `omitempty` tags of the `k8s.io/api/core/v1` types under a
//! Container (`types.go`), as data: which non-pointer fields
//! `encoding/json` leaves out when they hold their zero value, and which
//! fields hold nested objects. Written once for the two writers that
//! follow them: the container normaliser ([`super::container`]) and the
//! probe writer ([`super::probe`]).

/// A Go type under `corev1.Container`, for the fields it drops when zero.
#[derive(Clone, Copy)]
pub(super) enum GoType {
    Container,
    EnvVar,
    EnvVarSource,
    ObjectFieldSelector,
    ResourceFieldSelector,
    KeySelector,
    EnvFromSource,
    EnvSourceRef,
    VolumeMount,
    ContainerPort,
    Resources,
    ResourceClaim,
    Probe,
    Grpc,
    HttpHeader,
    LifecycleHandler,
    Lifecycle,
    Exec,
    HttpGet,
    TcpSocket,
    SecurityContext,
    Capabilities,
    SeLinuxOptions,
}

use GoType::*;

/// `(omitempty non-pointer fields, (field, type) of nested objects or lists of them)`.
pub(super) fn fields(ty: GoType) -> (&'static [&'static str], &'static [(&'static str, GoType)]) {
    match ty {
        Container => (
            &[
                "image",
                "command",
                "args",
                "workingDir",
                "ports",
                "envFrom",
                "env",
                "resizePolicy",
                "restartPolicyRules",
                "volumeMounts",
                "volumeDevices",
                "terminationMessagePath",
                "terminationMessagePolicy",
                "imagePullPolicy",
                "stdin",
                "stdinOnce",
                "tty",
            ],
            &[
                ("ports", ContainerPort),
                ("envFrom", EnvFromSource),
                ("env", EnvVar),
                ("resources", Resources),
                ("volumeMounts", VolumeMount),
                ("livenessProbe", Probe),
                ("readinessProbe", Probe),
                ("startupProbe", Probe),
                ("lifecycle", Lifecycle),
                ("securityContext", SecurityContext),
            ],
        ),
        EnvVar => (&["value"], &[("valueFrom", EnvVarSource)]),
        EnvVarSource => (
            &[],
            &[
                ("fieldRef", ObjectFieldSelector),
                ("resourceFieldRef", ResourceFieldSelector),
                ("configMapKeyRef", KeySelector),
                ("secretKeyRef", KeySelector),
            ],
        ),
        ObjectFieldSelector => (&["apiVersion"], &[]),
        ResourceFieldSelector => (&["containerName"], &[]),
        KeySelector | EnvSourceRef => (&["name"], &[]),
        EnvFromSource => (
            &["prefix"],
            &[("configMapRef", EnvSourceRef), ("secretRef", EnvSourceRef)],
        ),
        VolumeMount => (&["readOnly", "subPath", "subPathExpr"], &[]),
        ContainerPort => (&["name", "hostPort", "protocol", "hostIP"], &[]),
        Resources => (
            &["limits", "requests", "claims"],
            &[("claims", ResourceClaim)],
        ),
        ResourceClaim => (&["request"], &[]),
        Probe => (
            &[
                "initialDelaySeconds",
                "timeoutSeconds",
                "periodSeconds",
                "successThreshold",
                "failureThreshold",
            ],
            &[
                ("exec", Exec),
                ("httpGet", HttpGet),
                ("tcpSocket", TcpSocket),
                ("grpc", Grpc),
            ],
        ),
        LifecycleHandler => (
            &[],
            &[
                ("exec", Exec),
                ("httpGet", HttpGet),
                ("tcpSocket", TcpSocket),
            ],
        ),
        Lifecycle => (
            &[],
            &[
                ("postStart", LifecycleHandler),
                ("preStop", LifecycleHandler),
            ],
        ),
        Exec => (&["command"], &[]),
        HttpGet => (
            &["path", "host", "scheme", "httpHeaders"],
            &[("httpHeaders", HttpHeader)],
        ),
        // `port` and `name`, `value` have no omitempty; `service` is a pointer.
        Grpc | HttpHeader => (&[], &[]),
        TcpSocket => (&["host"], &[]),
        SecurityContext => (
            &[],
            &[
                ("capabilities", Capabilities),
                ("seLinuxOptions", SeLinuxOptions),
            ],
        ),
        Capabilities => (&["add", "drop"], &[]),
        SeLinuxOptions => (&["user", "role", "type", "level"], &[]),
    }
}

/// Whether `encoding/json` leaves `field` of `ty` out when it holds its
/// zero value.
pub(super) fn omitempty(ty: GoType, field: &str) -> bool {
    fields(ty).0.contains(&field)
}
