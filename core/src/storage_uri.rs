//! Storage URI forms KServe's injectors recognise.

use crate::release::Behaviour;
use sha2::{Digest, Sha256};

pub(crate) const PVC_PREFIX: &str = "pvc://";
pub(crate) const OCI_PREFIX: &str = "oci://";

/// `pvc://<name>[/<path>]` → (name, path); the path keeps a trailing `/`.
pub(crate) fn parse_pvc(uri: &str) -> Option<(&str, &str)> {
    let rest = uri.strip_prefix(PVC_PREFIX)?;
    Some(rest.split_once('/').unwrap_or((rest, "")))
}

/// An OCI model reference: `oci+<mode>://rest` pins the mode, `oci://rest`
/// leaves it to the config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OciUri<'a> {
    pub mode: Option<&'a str>,
    /// The reference without any scheme (`registry/repo:tag`).
    pub image: &'a str,
}

pub(crate) fn parse_oci(uri: &str) -> Option<OciUri<'_>> {
    if let Some(image) = uri.strip_prefix(OCI_PREFIX) {
        return Some(OciUri { mode: None, image });
    }
    let rest = uri.strip_prefix("oci+")?;
    let (mode, image) = rest.split_once("://")?;
    Some(OciUri {
        mode: Some(mode),
        image,
    })
}

/// [`parse_oci`] as `release` reads URIs: before v0.20 only `oci://` is
/// OCI, and `oci+<mode>://` is an ordinary storage URI.
pub(crate) fn parse_oci_in(uri: &str, release: Behaviour) -> Option<OciUri<'_>> {
    let oci = parse_oci(uri)?;
    (oci.mode.is_none() || release.oci_mode_schemes()).then_some(oci)
}

/// The mode KServe uses for a URI: the pinned one, else the configured one.
pub(crate) fn oci_effective_mode<'a>(uri: &OciUri<'a>, configured: &'a str) -> &'a str {
    uri.mode.unwrap_or(configured)
}

/// First 16 hex digits of SHA-256: the folder a local model lives in.
pub(crate) fn storage_key(uri: &str) -> String {
    let digest = Sha256::digest(uri.as_bytes());
    digest[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// The PVC URI of a model cached on a node by a LocalModel.
pub(crate) fn local_model_uri(src: &str, local_source: &str, pvc_name: &str) -> String {
    local_model_uri_in(src, local_source, pvc_name, &storage_key(local_source))
}

/// The same with the model's folder under `models/` given: up to v0.17
/// the LocalModelCache's name (the pod's localmodel label), not the hash.
pub(crate) fn local_model_uri_in(
    src: &str,
    local_source: &str,
    pvc_name: &str,
    folder: &str,
) -> String {
    let sub = src.strip_prefix(local_source).unwrap_or(src);
    let sub = if sub.starts_with('/') {
        sub.to_string()
    } else {
        format!("/{sub}")
    };
    format!("{PVC_PREFIX}{pvc_name}/models/{folder}{sub}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s37_parse_pvc() {
        assert_eq!(
            parse_pvc("pvc://test/model/model1"),
            Some(("test", "model/model1"))
        );
        assert_eq!(parse_pvc("pvc://test"), Some(("test", "")));
        assert_eq!(parse_pvc("pvc://test/dir/"), Some(("test", "dir/")));
        assert_eq!(parse_pvc("s3://test"), None);
    }

    #[test]
    fn oci_forms() {
        assert_eq!(
            parse_oci("oci://r/m:v1"),
            Some(OciUri {
                mode: None,
                image: "r/m:v1"
            })
        );
        let pinned = parse_oci("oci+native://r/m:v1").unwrap();
        assert_eq!(pinned.mode, Some("native"));
        assert_eq!(pinned.image, "r/m:v1");
        assert_eq!(parse_oci("s3://bla"), None);
        assert_eq!(parse_oci("oci+native"), None);
    }

    #[test]
    fn oci_mode_schemes_arrive_in_v0_20() {
        assert!(
            parse_oci_in("oci+native://r/m", crate::release::Release::V0_19_0.into()).is_none()
        );
        assert!(parse_oci_in("oci://r/m", crate::release::Release::V0_17_0.into()).is_some());
        assert_eq!(
            parse_oci_in("oci+fetch://r/m", crate::release::Release::V0_20_0.into())
                .and_then(|o| o.mode),
            Some("fetch")
        );
    }

    #[test]
    fn local_model_folder_is_the_cache_name_up_to_v0_17() {
        // kserve v0.17.0 storage_initializer_injector_test.go's table.
        let uri = |src, local| local_model_uri_in(src, local, "model-h100", "bar");
        assert_eq!(uri("s3://foo", "s3://foo"), "pvc://model-h100/models/bar/");
        assert_eq!(uri("s3://foo/", "s3://foo"), "pvc://model-h100/models/bar/");
        assert_eq!(
            uri("s3://foo/model1", "s3://foo"),
            "pvc://model-h100/models/bar/model1"
        );
        assert_eq!(
            uri("s3://foo/model1", "s3://foo/"),
            "pvc://model-h100/models/bar/model1"
        );
    }

    #[test]
    fn s30_local_model_subpaths() {
        assert_eq!(storage_key("s3://foo"), "83fbff445b51876f");
        assert_eq!(storage_key("s3://foo/"), "e65e626ad747873c");
        let uri = |src, local| local_model_uri(src, local, "model-h100");
        assert_eq!(
            uri("s3://foo", "s3://foo"),
            "pvc://model-h100/models/83fbff445b51876f/"
        );
        assert_eq!(
            uri("s3://foo/", "s3://foo"),
            "pvc://model-h100/models/83fbff445b51876f/"
        );
        assert_eq!(
            uri("s3://foo/model1", "s3://foo"),
            "pvc://model-h100/models/83fbff445b51876f/model1"
        );
        assert_eq!(
            uri("s3://foo/model1", "s3://foo/"),
            "pvc://model-h100/models/e65e626ad747873c/model1"
        );
    }
}
