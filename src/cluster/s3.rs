//! S3 settings as env: KServe's `BuildS3EnvVars`, used for an S3 Secret and
//! for an IRSA ServiceAccount. Each value comes from an annotation, else the
//! Secret's data key of the env's own name, else the `credentials.s3` config.

use super::objects::Secret;
use crate::config::S3Config;
use k8s_openapi::api::core::v1::EnvVar;
use std::collections::BTreeMap;

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

pub(super) fn literal(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.to_string(),
        value: Some(value.to_string()),
        value_from: None,
    }
}

/// Annotation, else data (a present key wins even when empty), else config.
fn setting(
    annotations: &BTreeMap<String, String>,
    data: Option<&Secret>,
    config: &S3Config,
    annotation: &str,
    env: &str,
) -> String {
    if let Some(v) = annotations.get(&format!("{ANNOTATION_PREFIX}{annotation}")) {
        return v.clone();
    }
    if let Some(v) = data.and_then(|s| s.get(env)) {
        return v.clone();
    }
    config_value(config, env).to_string()
}

/// The S3 env in KServe's order: `S3_USE_HTTPS`, `S3_ENDPOINT`,
/// `AWS_ENDPOINT_URL`, then [`SETTINGS`]; empty values are left out. An
/// endpoint given with a scheme decides `S3_USE_HTTPS` and is used as the
/// URL as given; without one the URL gets `http://` when `S3_USE_HTTPS` is
/// `0` and `https://` otherwise.
pub(super) fn s3_env(
    annotations: &BTreeMap<String, String>,
    data: Option<&Secret>,
    config: &S3Config,
) -> Vec<EnvVar> {
    let get = |annotation: &str, env: &str| setting(annotations, data, config, annotation, env);
    let mut use_https = get("s3-usehttps", S3_USE_HTTPS);
    let mut endpoint = get("s3-endpoint", S3_ENDPOINT);
    let url;
    if let Some(host) = endpoint.strip_prefix("https://") {
        use_https = "1".to_string();
        url = endpoint.clone();
        endpoint = host.to_string();
    } else if let Some(host) = endpoint.strip_prefix("http://") {
        use_https = "0".to_string();
        url = endpoint.clone();
        endpoint = host.to_string();
    } else {
        let scheme = if use_https == "0" { "http" } else { "https" };
        url = format!("{scheme}://{endpoint}");
    }
    let mut env = Vec::new();
    if !use_https.is_empty() {
        env.push(literal(S3_USE_HTTPS, &use_https));
    }
    if !endpoint.is_empty() {
        env.push(literal(S3_ENDPOINT, &endpoint));
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

#[cfg(test)]
mod tests {
    use super::*;

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
        let env = s3_env(&secret.annotations, Some(&secret), &S3Config::default());
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
        let env = s3_env(&secret.annotations, Some(&secret), &config);
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
        let env = s3_env(&secret.annotations, Some(&secret), &S3Config::default());
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
}
