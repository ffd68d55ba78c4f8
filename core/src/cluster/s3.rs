//! S3 settings as env: KServe's `BuildS3EnvVars` (`pkg/credentials/s3`),
//! used for an S3 Secret (`BuildSecretEnvs`, after the two key refs) and
//! for an IRSA ServiceAccount (`BuildServiceAccountEnvs`, from the
//! ServiceAccount's annotations). Each value comes from an annotation
//! (present counts, even empty), else the Secret's data key of the env's
//! own name, else the `credentials.s3` config (`getEnvValue`). Values are
//! copied as they are, except the endpoint (see [`s3_env`]).

use super::objects::Secret;
use super::Annotations;
use crate::config::S3Config;
use crate::release::Behaviour;
use k8s_openapi::api::core::v1::EnvVar;

const ANNOTATION_PREFIX: &str = "serving.kserve.io/";

pub(super) const S3_USE_HTTPS: &str = "S3_USE_HTTPS";
pub(super) const S3_ENDPOINT: &str = "S3_ENDPOINT";
pub(super) const AWS_ENDPOINT_URL: &str = "AWS_ENDPOINT_URL";

/// Which settings are read where; `(annotation suffix, env and data key)`,
/// in the order the env is emitted after the endpoint pair.
const SETTINGS: [(&str, &str); 7] = [
    ("s3-verifyssl", "S3_VERIFY_SSL"),
    ("s3-useanoncredential", "awsAnonymousCredential"),
    ("s3-region", "AWS_DEFAULT_REGION"),
    ("s3-usevirtualbucket", "S3_USER_VIRTUAL_BUCKET"),
    ("s3-useaccelerate", "S3_USE_ACCELERATE"),
    ("s3-cabundle", "AWS_CA_BUNDLE"),
    ("s3-cabundle-configmap", "AWS_CA_BUNDLE_CONFIGMAP"),
];

fn config_value<'a>(config: &'a S3Config, env: &str) -> &'a str {
    match env {
        S3_USE_HTTPS => &config.use_https,
        S3_ENDPOINT => &config.endpoint,
        "S3_VERIFY_SSL" => &config.verify_ssl,
        "awsAnonymousCredential" => &config.use_anonymous_credential,
        "AWS_DEFAULT_REGION" => &config.region,
        "S3_USER_VIRTUAL_BUCKET" => &config.use_virtual_bucket,
        "S3_USE_ACCELERATE" => &config.use_accelerate,
        "AWS_CA_BUNDLE" => &config.ca_bundle,
        "AWS_CA_BUNDLE_CONFIGMAP" => &config.ca_bundle_config_map,
        _ => "",
    }
}

/// A variable with a literal value; an empty one is written without
/// `value`, as Go's `omitempty` writes KServe's (`S3_ENDPOINT` of a blank
/// endpoint, an empty `AWS_CA_BUNDLE_CONFIGMAP` of a storage-spec entry).
pub(super) fn literal(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.to_string(),
        value: (!value.is_empty()).then(|| value.to_string()),
        value_from: None,
    }
}

/// Annotation, else data (a present key wins even when empty), else config.
fn setting(
    annotations: &dyn Annotations,
    data: Option<&Secret>,
    config: &S3Config,
    annotation: &str,
    env: &str,
) -> String {
    if let Some(v) = annotations.annotation(&format!("{ANNOTATION_PREFIX}{annotation}")) {
        return v.to_string();
    }
    if let Some(v) = data.and_then(|s| s.get(env)) {
        return v.to_string();
    }
    config_value(config, env).to_string()
}

/// The S3 env in KServe's order (`BuildS3EnvVars`): the endpoint block,
/// then [`SETTINGS`], each left out when its value is empty.
///
/// The endpoint block follows `getEndpointConfiguration`: it exists only
/// when the selected endpoint is not empty *before* trimming (an annotation
/// of `""` is present, so it hides data and config and there is no block).
/// Only the endpoint is then trimmed (`strings.TrimSpace`, whatever its
/// source). An `https://` or `http://` prefix, in any case, decides
/// `S3_USE_HTTPS` (`1`/`0`) and the URL is the trimmed endpoint as given;
/// without one `S3_USE_HTTPS` is the selected setting as written (left out
/// when empty) and the URL is `http://` only for exactly `0`. A blank
/// endpoint still gives `S3_ENDPOINT` (empty) and a bare scheme as URL.
///
/// Before v0.17 ([`crate::release::Release::s3_endpoint_scheme`]) `S3_USE_HTTPS` comes
/// first whenever it is set, and the endpoint is used as written: the URL
/// is `http://` only for a `S3_USE_HTTPS` of exactly `0`. v0.15 reads no
/// Secret data ([`crate::release::Release::s3_secret_data`]) and has its own
/// endpoint rules (`v0_15_endpoint`, [`crate::release::Release::s3_endpoint_resolved`]).
pub(super) fn s3_env(
    annotations: &dyn Annotations,
    data: Option<&Secret>,
    config: &S3Config,
    release: Behaviour,
) -> Vec<EnvVar> {
    // v0.15 reads no setting from the Secret's data.
    let data = data.filter(|_| release.s3_secret_data());
    let get = |annotation: &str, env: &str| setting(annotations, data, config, annotation, env);
    let mut env = Vec::new();
    let configured = get("s3-endpoint", S3_ENDPOINT);
    if !release.s3_endpoint_resolved() {
        v0_15_endpoint(annotations, config, &mut env);
    } else if !release.s3_endpoint_scheme() {
        let use_https = get("s3-usehttps", S3_USE_HTTPS);
        if !use_https.is_empty() {
            env.push(literal(S3_USE_HTTPS, &use_https));
        }
        if !configured.is_empty() {
            let scheme = if use_https == "0" { "http" } else { "https" };
            env.push(literal(S3_ENDPOINT, &configured));
            env.push(literal(
                AWS_ENDPOINT_URL,
                &format!("{scheme}://{configured}"),
            ));
        }
    } else if !configured.is_empty() {
        let (use_https, endpoint, url) =
            endpoint_configuration(configured.trim(), || get("s3-usehttps", S3_USE_HTTPS));
        if !use_https.is_empty() {
            env.push(literal(S3_USE_HTTPS, &use_https));
        }
        env.push(literal(S3_ENDPOINT, endpoint));
        env.push(literal(AWS_ENDPOINT_URL, &url));
    }
    for (annotation, name) in SETTINGS {
        let value = get(annotation, name);
        if !value.is_empty() {
            env.push(literal(name, &value));
        }
    }
    env
}

/// v0.15's endpoint block (`s3.BuildS3EnvVars` @v0.15.0): an endpoint
/// annotation (present, even empty) gives `S3_USE_HTTPS` only beside a
/// `s3-usehttps` annotation, which makes the URL `http://` when `0`; else a
/// configured endpoint gives `S3_USE_HTTPS` only when the configured value
/// is `0` (then the URL is `http://`). The endpoint is used as written.
fn v0_15_endpoint(annotations: &dyn Annotations, config: &S3Config, env: &mut Vec<EnvVar>) {
    let annotation = |suffix: &str| annotations.annotation(&format!("{ANNOTATION_PREFIX}{suffix}"));
    let (endpoint, use_https) = match annotation("s3-endpoint") {
        Some(endpoint) => (endpoint, annotation("s3-usehttps")),
        None if !config.endpoint.is_empty() => (
            config.endpoint.as_str(),
            Some(config.use_https.as_str()).filter(|v| *v == "0"),
        ),
        None => return,
    };
    if let Some(use_https) = use_https {
        env.push(literal(S3_USE_HTTPS, use_https));
    }
    let scheme = if use_https == Some("0") {
        "http"
    } else {
        "https"
    };
    env.push(literal(S3_ENDPOINT, endpoint));
    env.push(literal(AWS_ENDPOINT_URL, &format!("{scheme}://{endpoint}")));
}

/// `(S3_USE_HTTPS, S3_ENDPOINT, AWS_ENDPOINT_URL)` for a trimmed endpoint;
/// `use_https` is read only when the endpoint has no scheme.
fn endpoint_configuration(
    endpoint: &str,
    use_https: impl FnOnce() -> String,
) -> (String, &str, String) {
    for (scheme, flag) in [("https://", "1"), ("http://", "0")] {
        let has_scheme = endpoint
            .get(..scheme.len())
            .is_some_and(|p| p.eq_ignore_ascii_case(scheme));
        if has_scheme {
            return (
                flag.to_string(),
                &endpoint[scheme.len()..],
                endpoint.to_string(),
            );
        }
    }
    let use_https = use_https();
    let scheme = if use_https == "0" { "http" } else { "https" };
    let url = format!("{scheme}://{endpoint}");
    (use_https, endpoint, url)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::release::Release;
    use std::collections::BTreeMap;

    fn s3_env(
        annotations: &dyn Annotations,
        data: Option<&Secret>,
        config: &S3Config,
    ) -> Vec<EnvVar> {
        super::s3_env(annotations, data, config, Release::Head.into())
    }

    fn names_values(env: &[EnvVar]) -> Vec<(String, String)> {
        env.iter()
            .map(|e| (e.name.clone(), e.value.clone().unwrap_or_default()))
            .collect()
    }

    fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
        items
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn s13_endpoint_without_scheme_defaults_to_https_url() {
        let secret = Secret::new("default", "s3-secret")
            .with_annotation("serving.kserve.io/s3-endpoint", "s3.aws.com");
        let env = s3_env(&secret, Some(&secret), &S3Config::default());
        assert_eq!(
            names_values(&env),
            pairs(&[
                ("S3_ENDPOINT", "s3.aws.com"),
                ("AWS_ENDPOINT_URL", "https://s3.aws.com")
            ])
        );
    }

    #[test]
    fn annotation_beats_data_beats_config() {
        let config = S3Config {
            region: "cfg-region".into(),
            verify_ssl: "0".into(),
            use_accelerate: "true".into(),
            ..S3Config::default()
        };
        let secret = Secret::new("ns", "s")
            .with_annotation("serving.kserve.io/s3-region", "ann-region")
            .with_data("AWS_DEFAULT_REGION", "data-region")
            .with_data("S3_VERIFY_SSL", "1")
            .with_data("S3_USE_HTTPS", "0")
            .with_data("S3_ENDPOINT", "minio:9000");
        let env = s3_env(&secret, Some(&secret), &config);
        assert_eq!(
            names_values(&env),
            pairs(&[
                ("S3_USE_HTTPS", "0"),
                ("S3_ENDPOINT", "minio:9000"),
                ("AWS_ENDPOINT_URL", "http://minio:9000"),
                ("S3_VERIFY_SSL", "1"),
                ("AWS_DEFAULT_REGION", "ann-region"),
                ("S3_USE_ACCELERATE", "true"),
            ])
        );
    }

    #[test]
    fn endpoint_scheme_sets_use_https_and_url() {
        let sa = BTreeMap::from([(
            "serving.kserve.io/s3-endpoint".to_string(),
            "http://minio.local".to_string(),
        )]);
        let env = s3_env(&sa, None, &S3Config::default());
        assert_eq!(
            names_values(&env),
            pairs(&[
                ("S3_USE_HTTPS", "0"),
                ("S3_ENDPOINT", "minio.local"),
                ("AWS_ENDPOINT_URL", "http://minio.local"),
            ])
        );
        let config = S3Config {
            endpoint: "https://s3.example".into(),
            use_https: "0".into(),
            ..S3Config::default()
        };
        let env = s3_env(&BTreeMap::new(), None, &config);
        assert_eq!(env[0], literal("S3_USE_HTTPS", "1"));
        assert_eq!(env[2], literal("AWS_ENDPOINT_URL", "https://s3.example"));
    }

    #[test]
    fn s20_s22_ca_bundle_settings() {
        let secret = Secret::new("ns", "s")
            .with_annotation(
                "serving.kserve.io/s3-cabundle-configmap",
                "cabundle-annotation",
            )
            .with_annotation("serving.kserve.io/s3-cabundle", "/path/to/ca.crt");
        let env = s3_env(&secret, Some(&secret), &S3Config::default());
        assert_eq!(
            names_values(&env),
            pairs(&[
                ("AWS_CA_BUNDLE", "/path/to/ca.crt"),
                ("AWS_CA_BUNDLE_CONFIGMAP", "cabundle-annotation"),
            ])
        );
    }

    #[test]
    fn empty_everything_gives_no_env() {
        assert!(s3_env(&BTreeMap::new(), None, &S3Config::default()).is_empty());
    }

    fn annotated(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (format!("serving.kserve.io/{k}"), v.to_string()))
            .collect()
    }

    #[test]
    fn the_endpoint_alone_is_trimmed_after_its_emptiness_test() {
        let config = S3Config::default();
        let env = s3_env(
            &annotated(&[("s3-endpoint", " s3.example "), ("s3-region", " r ")]),
            None,
            &config,
        );
        assert_eq!(
            names_values(&env),
            pairs(&[
                ("S3_ENDPOINT", "s3.example"),
                ("AWS_ENDPOINT_URL", "https://s3.example"),
                ("AWS_DEFAULT_REGION", " r "),
            ])
        );
        let blank = s3_env(&annotated(&[("s3-endpoint", "   ")]), None, &config);
        assert_eq!(
            names_values(&blank),
            pairs(&[("S3_ENDPOINT", ""), ("AWS_ENDPOINT_URL", "https://")])
        );
        assert_eq!(blank[0].value, None);
    }

    #[test]
    fn use_https_appears_only_with_an_endpoint() {
        let config = S3Config {
            use_https: "0".into(),
            ..S3Config::default()
        };
        assert!(s3_env(&BTreeMap::new(), None, &config).is_empty());
        let hidden = S3Config {
            endpoint: "from-config".into(),
            ..config.clone()
        };
        // A present but empty annotation hides the config's endpoint.
        assert!(s3_env(&annotated(&[("s3-endpoint", "")]), None, &hidden).is_empty());
    }

    #[test]
    fn the_scheme_is_matched_in_any_case_and_kept_in_the_url() {
        let env = s3_env(
            &annotated(&[
                ("s3-endpoint", "  HTTP://Host:9000/p "),
                ("s3-usehttps", "1"),
            ]),
            None,
            &S3Config::default(),
        );
        assert_eq!(
            names_values(&env),
            pairs(&[
                ("S3_USE_HTTPS", "0"),
                ("S3_ENDPOINT", "Host:9000/p"),
                ("AWS_ENDPOINT_URL", "HTTP://Host:9000/p"),
            ])
        );
        let raw = s3_env(
            &annotated(&[("s3-endpoint", "h"), ("s3-usehttps", "false")]),
            None,
            &S3Config::default(),
        );
        assert_eq!(raw[0], literal("S3_USE_HTTPS", "false"));
        assert_eq!(raw[2], literal("AWS_ENDPOINT_URL", "https://h"));
    }

    #[test]
    fn v0_15_reads_no_secret_data_and_its_own_endpoint_rules() {
        let v0_15 = |annotations: &[(&str, &str)], data: Option<&Secret>, config: &S3Config| {
            let annotations: BTreeMap<String, String> = (annotations.iter())
                .map(|(k, v)| (format!("{ANNOTATION_PREFIX}{k}"), v.to_string()))
                .collect();
            names_values(&super::s3_env(
                &annotations,
                data,
                config,
                Release::V0_15_0.into(),
            ))
        };
        // Secret data is ignored (HEAD reads S3_ENDPOINT and S3_USE_HTTPS from it).
        let secret = Secret::new("ns", "s")
            .with_data("S3_ENDPOINT", "minio:9000")
            .with_data("S3_USE_HTTPS", "0")
            .with_data("AWS_DEFAULT_REGION", "eu-1");
        assert_eq!(v0_15(&[], Some(&secret), &S3Config::default()), pairs(&[]));
        // From the config, S3_USE_HTTPS only when it is "0".
        let mut config = S3Config {
            endpoint: "minio:9000".into(),
            use_https: "1".into(),
            ..Default::default()
        };
        let https = [
            ("S3_ENDPOINT", "minio:9000"),
            ("AWS_ENDPOINT_URL", "https://minio:9000"),
        ];
        assert_eq!(v0_15(&[], None, &config), pairs(&https));
        config.use_https = "0".into();
        assert_eq!(
            v0_15(&[], None, &config),
            pairs(&[
                ("S3_USE_HTTPS", "0"),
                ("S3_ENDPOINT", "minio:9000"),
                ("AWS_ENDPOINT_URL", "http://minio:9000")
            ])
        );
        // An endpoint annotation wins, with S3_USE_HTTPS only from its own
        // annotation; the config's "0" is then not read.
        assert_eq!(
            v0_15(&[("s3-endpoint", "s3.example")], None, &config),
            pairs(&[
                ("S3_ENDPOINT", "s3.example"),
                ("AWS_ENDPOINT_URL", "https://s3.example")
            ])
        );
        // No endpoint: no S3_USE_HTTPS, whatever is set.
        let no_endpoint = S3Config {
            use_https: "0".into(),
            ..Default::default()
        };
        assert_eq!(
            v0_15(&[("s3-usehttps", "0")], None, &no_endpoint),
            pairs(&[])
        );
    }

    /// Every annotation these rules read is one the objects keep.
    #[test]
    fn every_annotation_read_is_kept() {
        let suffixes = ["s3-endpoint", "s3-usehttps"];
        for suffix in suffixes.into_iter().chain(SETTINGS.map(|(a, _)| a)) {
            let key = format!("{ANNOTATION_PREFIX}{suffix}");
            assert!(super::super::annotation_read(&key), "{key}");
        }
        let read = suffixes.len() + SETTINGS.len();
        assert_eq!(super::super::objects::READ_ANNOTATIONS.len(), read + 1);
    }
}
