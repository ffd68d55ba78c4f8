//! What one credential Secret gives a container, by kind. KServe looks at
//! the data key names in a fixed order and the first kind that matches wins.

use super::objects::Secret;
use super::s3::literal;
use crate::release::Behaviour;
use k8s_openapi::api::core::v1::{
    EnvVar, EnvVarSource, SecretKeySelector, SecretVolumeSource, Volume, VolumeMount,
};

pub(super) const DEFAULT_S3_ACCESS_KEY_ID_NAME: &str = "awsAccessKeyID";
pub(super) const DEFAULT_S3_SECRET_ACCESS_KEY_NAME: &str = "awsSecretAccessKey";
pub(super) const DEFAULT_GCS_CREDENTIAL_FILE_NAME: &str = "gcloud-application-credentials.json";
pub(super) const GCS_VOLUME: &str = "user-gcp-sa";
pub(super) const GCS_MOUNT_PATH: &str = "/var/secrets/";
pub(crate) const GCS_CREDENTIALS_ENV: &str = "GOOGLE_APPLICATION_CREDENTIALS";
pub(super) const HDFS_VOLUME: &str = "hdfs-secrets";
pub(super) const HDFS_MOUNT_PATH: &str = "/var/secrets/kserve-hdfscreds";
const HDFS_NAMENODE: &str = "HDFS_NAMENODE";
const HF_TOKEN: &str = "HF_TOKEN";
const HF_TRANSFER: &str = "HF_HUB_ENABLE_HF_TRANSFER";
const MODELSCOPE_TOKEN: &str = "MODELSCOPE_API_TOKEN";
const HTTPS_HOST: &str = "https-host";
const HTTPS_HEADERS: &str = "headers";
const AZURE_STORAGE_ACCESS_KEY: &str = "AZURE_STORAGE_ACCESS_KEY";
const AZURE_TENANT_ID: &str = "AZURE_TENANT_ID";

/// Env names in KServe's order, each with the legacy `AZ_*` data key that
/// is preferred when present.
const AZURE_ENV: [(&str, Option<&str>); 9] = [
    ("AZURE_SUBSCRIPTION_ID", Some("AZ_SUBSCRIPTION_ID")),
    (AZURE_TENANT_ID, Some("AZ_TENANT_ID")),
    ("AZURE_CLIENT_ID", Some("AZ_CLIENT_ID")),
    ("AZURE_CLIENT_SECRET", Some("AZ_CLIENT_SECRET")),
    (AZURE_STORAGE_ACCESS_KEY, None),
    ("AZURE_ACCESS_TOKEN", None),
    ("AZURE_ACCESS_EXPIRES_ON_SECONDS", None),
    ("AZURE_ACCOUNT_NAME", None),
    ("AZURE_SERVICE_URL", None),
];

/// Every env variable KServe's credential builders fill from a Secret
/// (`valueFrom.secretKeyRef`): S3's pair, every Azure variable, the Azure
/// storage key, Hugging Face's and ModelScope's tokens, and the
/// storage-spec `STORAGE_CONFIG`. A container carrying one of these as a
/// literal `value` holds what should have stayed in the Secret.
pub(crate) fn secret_env_names() -> Vec<&'static str> {
    let mut names = vec!["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"];
    names.extend(AZURE_ENV.iter().map(|(env, _)| *env));
    names.extend([
        HF_TOKEN,
        MODELSCOPE_TOKEN,
        crate::constants::STORAGE_CONFIG_ENV,
    ]);
    names.sort_unstable();
    names.dedup();
    names
}

/// Data keys that make a Secret an Azure service-principal/token Secret.
const AZURE_MARKERS: [&str; 3] = ["AZ_CLIENT_ID", "AZURE_CLIENT_ID", "AZURE_ACCESS_TOKEN"];

/// What a Secret contributes; S3 env is merged by name, the rest appended.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Contribution {
    /// Handled by the caller (it needs the S3 config).
    S3,
    Env(Vec<EnvVar>),
    Volume {
        volume: Box<Volume>,
        mount: VolumeMount,
        env: Vec<EnvVar>,
    },
    None,
}

pub(super) fn secret_key_ref(env: &str, secret: &str, key: &str) -> EnvVar {
    EnvVar {
        name: env.to_string(),
        value: None,
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: secret.to_string(),
                key: key.to_string(),
                optional: None,
            }),
            ..Default::default()
        }),
    }
}

fn secret_volume(volume: &str, mount_path: &str, secret: &str) -> (Volume, VolumeMount) {
    let volume = Volume {
        name: volume.to_string(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(secret.to_string()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mount = VolumeMount {
        name: volume.name.clone(),
        mount_path: mount_path.to_string(),
        read_only: Some(true),
        ..Default::default()
    };
    (volume, mount)
}

/// Classifies a Secret, first match wins: S3 (the configured secret-key
/// key), GCS (the configured credential file), Azure service principal or
/// token, Azure storage key, https host headers, HDFS, Hugging Face,
/// ModelScope (HEAD only: see [`crate::release::Release::modelscope_credentials`]).
pub(super) fn contribution(
    secret: &Secret,
    s3_secret_key_name: &str,
    gcs_file_name: &str,
    release: Behaviour,
) -> Contribution {
    let name = secret.name();
    if secret.has_key(s3_secret_key_name) {
        Contribution::S3
    } else if secret.has_key(gcs_file_name) {
        let (volume, mount) = secret_volume(GCS_VOLUME, GCS_MOUNT_PATH, name);
        let path = format!("{GCS_MOUNT_PATH}{gcs_file_name}");
        let env = vec![literal(GCS_CREDENTIALS_ENV, &path)];
        let volume = Box::new(volume);
        Contribution::Volume { volume, mount, env }
    } else if azure_markers(release).iter().any(|k| secret.has_key(k)) {
        Contribution::Env(azure_env(secret, release))
    } else if secret.has_key(AZURE_STORAGE_ACCESS_KEY) {
        let key = AZURE_STORAGE_ACCESS_KEY;
        Contribution::Env(vec![secret_key_ref(key, name, key)])
    } else if secret.has_key(HTTPS_HOST) {
        Contribution::Env(https_env(secret))
    } else if secret.has_key(HDFS_NAMENODE) {
        let (volume, mount) = secret_volume(HDFS_VOLUME, HDFS_MOUNT_PATH, name);
        let (volume, env) = (Box::new(volume), Vec::new());
        Contribution::Volume { volume, mount, env }
    } else if secret.has_key(HF_TOKEN) {
        let mut env = vec![secret_key_ref(HF_TOKEN, name, HF_TOKEN)];
        // v0.15's builder adds this itself (there are no default HF env).
        if !release.hf_secret_token_only() {
            env.push(literal(HF_TRANSFER, "1"));
        }
        Contribution::Env(env)
    } else if secret.has_key(MODELSCOPE_TOKEN) && release.modelscope_credentials() {
        let key = MODELSCOPE_TOKEN;
        Contribution::Env(vec![secret_key_ref(key, name, key)])
    } else {
        Contribution::None
    }
}

/// Data keys that make a Secret an Azure Secret under `release`: v0.15
/// has no access-token kind ([`crate::release::Release::azure_access_token`]).
fn azure_markers(release: Behaviour) -> &'static [&'static str] {
    if release.azure_access_token() {
        &AZURE_MARKERS
    } else {
        &AZURE_MARKERS[..2]
    }
}

/// Every Azure variable whose data key exists (legacy key preferred), and
/// `AZURE_TENANT_ID` always, as KServe does. v0.15 knows the first five
/// variables and leaves out only an absent client secret or storage key
/// (`azure.BuildSecretEnvs` @v0.15.0).
fn azure_env(secret: &Secret, release: Behaviour) -> Vec<EnvVar> {
    let (known, omitted): (&[_], &[&str]) = if release.azure_env_of_present_keys() {
        (&AZURE_ENV, &[])
    } else {
        (
            &AZURE_ENV[..5],
            &["AZURE_CLIENT_SECRET", AZURE_STORAGE_ACCESS_KEY],
        )
    };
    known
        .iter()
        .filter_map(|(env, legacy)| {
            let key = legacy.filter(|k| secret.has_key(k)).unwrap_or(env);
            let kept = match release.azure_env_of_present_keys() {
                true => secret.has_key(key) || *env == AZURE_TENANT_ID,
                false => secret.has_key(key) || !omitted.contains(env),
            };
            kept.then(|| secret_key_ref(env, secret.name(), key))
        })
        .collect()
}

/// `<https-host>-headers` = `headers`, only when both keys exist.
fn https_env(secret: &Secret) -> Vec<EnvVar> {
    match (secret.get(HTTPS_HOST), secret.get(HTTPS_HEADERS)) {
        (Some(host), Some(headers)) => vec![literal(&format!("{host}-headers"), headers)],
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::release::Release;

    fn classify(secret: &Secret) -> Contribution {
        contribution(
            secret,
            DEFAULT_S3_SECRET_ACCESS_KEY_NAME,
            DEFAULT_GCS_CREDENTIAL_FILE_NAME,
            Release::Head.into(),
        )
    }

    fn ref_of(e: &EnvVar) -> (String, String, String) {
        let r = e
            .value_from
            .as_ref()
            .unwrap()
            .secret_key_ref
            .as_ref()
            .unwrap();
        (e.name.clone(), r.name.clone(), r.key.clone())
    }

    #[test]
    fn s14_gcs_secret_gives_volume_mount_and_env() {
        let s = Secret::new("default", "user-gcp-sa")
            .with_data("gcloud-application-credentials.json", "{}");
        let Contribution::Volume { volume, mount, env } = classify(&s) else {
            panic!()
        };
        assert_eq!(volume.name, "user-gcp-sa");
        assert_eq!(
            volume.secret.unwrap().secret_name.as_deref(),
            Some("user-gcp-sa")
        );
        assert_eq!(
            (mount.name.as_str(), mount.mount_path.as_str()),
            ("user-gcp-sa", "/var/secrets/")
        );
        assert_eq!(mount.read_only, Some(true));
        assert_eq!(
            env,
            [literal(
                "GOOGLE_APPLICATION_CREDENTIALS",
                "/var/secrets/gcloud-application-credentials.json"
            )]
        );
    }

    #[test]
    fn every_env_a_secret_fills_is_in_the_audited_names() {
        let names = secret_env_names();
        let secrets = [
            Secret::new("ns", "hf").with_data("HF_TOKEN", "t"),
            Secret::new("ns", "ms").with_data("MODELSCOPE_API_TOKEN", "t"),
            Secret::new("ns", "az").with_data("AZURE_STORAGE_ACCESS_KEY", "k"),
            AZURE_ENV
                .iter()
                .fold(Secret::new("ns", "sp"), |s, (env, _)| s.with_data(env, "v")),
        ];
        for secret in &secrets {
            let Contribution::Env(env) = classify(secret) else {
                panic!("{} gives env", secret.name())
            };
            for var in env.iter().filter(|v| v.value_from.is_some()) {
                assert!(
                    names.contains(&var.name.as_str()),
                    "{} is not audited",
                    var.name
                );
            }
        }
        for name in [
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            "STORAGE_CONFIG",
            "AZURE_CLIENT_SECRET",
        ] {
            assert!(names.contains(&name), "{name}");
        }
    }

    #[test]
    fn s3_wins_over_every_other_kind() {
        let s = Secret::new("ns", "s")
            .with_data("awsSecretAccessKey", "x")
            .with_data("gcloud-application-credentials.json", "{}")
            .with_data("HF_TOKEN", "t");
        assert_eq!(classify(&s), Contribution::S3);
    }

    #[test]
    fn azure_prefers_legacy_keys_and_always_emits_tenant() {
        let s = Secret::new("ns", "az")
            .with_data("AZ_CLIENT_ID", "a")
            .with_data("AZURE_CLIENT_ID", "b")
            .with_data("AZ_CLIENT_SECRET", "c")
            .with_data("AZURE_SUBSCRIPTION_ID", "d");
        let Contribution::Env(env) = classify(&s) else {
            panic!()
        };
        let got: Vec<_> = env.iter().map(ref_of).collect();
        let want: Vec<(String, String, String)> = [
            ("AZURE_SUBSCRIPTION_ID", "AZURE_SUBSCRIPTION_ID"),
            ("AZURE_TENANT_ID", "AZURE_TENANT_ID"),
            ("AZURE_CLIENT_ID", "AZ_CLIENT_ID"),
            ("AZURE_CLIENT_SECRET", "AZ_CLIENT_SECRET"),
        ]
        .iter()
        .map(|(e, k)| (e.to_string(), "az".to_string(), k.to_string()))
        .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn azure_access_token_secret() {
        let s = Secret::new("ns", "tok")
            .with_data("AZURE_ACCESS_TOKEN", "t")
            .with_data("AZURE_ACCOUNT_NAME", "acct");
        let Contribution::Env(env) = classify(&s) else {
            panic!()
        };
        let names: Vec<_> = env.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "AZURE_TENANT_ID",
                "AZURE_ACCESS_TOKEN",
                "AZURE_ACCOUNT_NAME"
            ]
        );
    }

    #[test]
    fn azure_storage_key_alone() {
        let s = Secret::new("ns", "key").with_data("AZURE_STORAGE_ACCESS_KEY", "k");
        let Contribution::Env(env) = classify(&s) else {
            panic!()
        };
        assert_eq!(
            env.iter().map(ref_of).collect::<Vec<_>>(),
            [(
                "AZURE_STORAGE_ACCESS_KEY".to_string(),
                "key".to_string(),
                "AZURE_STORAGE_ACCESS_KEY".to_string()
            )]
        );
    }

    #[test]
    fn https_headers_need_both_keys() {
        let s = Secret::new("ns", "h")
            .with_data("https-host", "github.com")
            .with_data("headers", "{\"a\": \"b\"}");
        assert_eq!(
            classify(&s),
            Contribution::Env(vec![literal("github.com-headers", "{\"a\": \"b\"}")])
        );
        let host_only = Secret::new("ns", "h").with_data("https-host", "github.com");
        assert_eq!(classify(&host_only), Contribution::Env(vec![]));
    }

    #[test]
    fn hdfs_hf_modelscope_and_unknown() {
        let hdfs = Secret::new("ns", "hdfscreds").with_data("HDFS_NAMENODE", "https://nn");
        let Contribution::Volume { volume, mount, env } = classify(&hdfs) else {
            panic!()
        };
        assert_eq!(volume.name, "hdfs-secrets");
        assert_eq!(mount.mount_path, "/var/secrets/kserve-hdfscreds");
        assert!(env.is_empty());
        let hf = Secret::new("ns", "hf").with_data("HF_TOKEN", "t");
        let Contribution::Env(env) = classify(&hf) else {
            panic!()
        };
        assert_eq!(
            ref_of(&env[0]),
            ("HF_TOKEN".into(), "hf".into(), "HF_TOKEN".into())
        );
        let ms = Secret::new("ns", "ms").with_data("MODELSCOPE_API_TOKEN", "t");
        // v0.20 and older skip it ("unsupported secret").
        let v0_20 = contribution(&ms, "awsSecretAccessKey", "x.json", Release::V0_20_0.into());
        assert!(matches!(v0_20, Contribution::None));
        let Contribution::Env(env) = classify(&ms) else {
            panic!()
        };
        assert_eq!(env[0].name, "MODELSCOPE_API_TOKEN");
        let other = Secret::new("ns", "token").with_data("token", "x");
        assert_eq!(classify(&other), Contribution::None);
    }

    #[test]
    fn v0_15_azure_keys_and_hf_transfer() {
        let v0_15 = |secret: &Secret| {
            contribution(
                secret,
                DEFAULT_S3_SECRET_ACCESS_KEY_NAME,
                DEFAULT_GCS_CREDENTIAL_FILE_NAME,
                Release::V0_15_0.into(),
            )
        };
        // Five keys; only an absent client secret or storage key is left out.
        let sp = Secret::new("ns", "sp")
            .with_data("AZURE_CLIENT_ID", "id")
            .with_data("AZURE_ACCESS_TOKEN", "t");
        let Contribution::Env(env) = v0_15(&sp) else {
            panic!()
        };
        let names: Vec<_> = env.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "AZURE_SUBSCRIPTION_ID",
                "AZURE_TENANT_ID",
                "AZURE_CLIENT_ID"
            ]
        );
        // No access-token kind.
        let token = Secret::new("ns", "tok").with_data("AZURE_ACCESS_TOKEN", "t");
        assert_eq!(v0_15(&token), Contribution::None);
        // The token stays a reference (kept as HEAD), then the transfer switch.
        let hf = Secret::new("ns", "hf").with_data("HF_TOKEN", "t");
        let Contribution::Env(env) = v0_15(&hf) else {
            panic!()
        };
        assert_eq!(
            ref_of(&env[0]),
            ("HF_TOKEN".into(), "hf".into(), "HF_TOKEN".into())
        );
        assert_eq!(env[1], literal("HF_HUB_ENABLE_HF_TRANSFER", "1"));
        assert_eq!(env.len(), 2);
    }
}
