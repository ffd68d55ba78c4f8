use super::*;

#[test]
fn the_probe_is_a_podtemplate_with_a_mounted_image_volume() {
    let template: PodTemplate = serde_json::from_value(probe_template()).expect("a PodTemplate");
    assert!(has_image_volume(&template));
    let mut dropped = template.clone();
    let spec = dropped.template.as_mut().and_then(|t| t.spec.as_mut());
    spec.expect("spec").volumes = Some(vec![]);
    assert!(!has_image_volume(&dropped));
}
