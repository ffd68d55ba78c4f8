//! The upgrade report as text: the pods, each change, then the summary
//! (the changes summed by kind, the ConfigMap keys, the rows, the totals).

use super::report::{Admission, UpgradeReport};
use crate::audit::report::write_table;
use serde_json::Value;
use std::fmt::Write;

impl UpgradeReport {
    /// The summary: the changes by kind, the ConfigMap keys, the rows and
    /// the totals.
    pub fn summary(&self) -> String {
        let mut out = format!("KServe {} → {}\n", self.from, self.to);
        if !self.changes.is_empty() {
            out.push('\n');
            let header = ["CHANGE", "CONTAINER", "FIELD", "ROWS", "PODS"].map(str::to_string);
            let cells: Vec<[String; 5]> = (self.changes.iter())
                .map(|c| {
                    [
                        c.kind.as_str().to_string(),
                        container(c.container.as_deref(), c.init),
                        c.field.clone(),
                        c.causes.text(),
                        c.pods.to_string(),
                    ]
                })
                .collect();
            write_table(&mut out, &header, &cells);
        }
        if !self.config.is_empty() {
            out.push('\n');
            let current = format!("READ BY {}", self.from);
            let target = format!("READ BY {}", self.to);
            let header = [
                "CONFIGMAP KEY".into(),
                "VALUE".into(),
                current,
                target,
                "ROWS".into(),
            ];
            let cells: Vec<[String; 5]> = (self.config.iter())
                .map(|k| {
                    let (was, now) = (
                        shown(k.current_value.as_ref()),
                        shown(k.target_value.as_ref()),
                    );
                    let value = if was == now {
                        was
                    } else {
                        format!("{was} → {now}")
                    };
                    [
                        k.key.into(),
                        value,
                        k.current.into(),
                        k.target.into(),
                        k.rows.join(", "),
                    ]
                })
                .collect();
            write_table(&mut out, &header, &cells);
        }
        if !self.rows.is_empty() {
            out.push('\n');
            let header = ["ROW".to_string(), "PODS".to_string()];
            let cells: Vec<[String; 2]> = (self.rows.iter())
                .map(|r| [r.row.to_string(), r.pods.to_string()])
                .collect();
            write_table(&mut out, &header, &cells);
        }
        let t = &self.totals;
        let explained = match t.unexplained {
            0 => "every change explained".to_string(),
            n => format!("{n} unexplained"),
        };
        let _ = writeln!(
            out,
            "\n{} pods: {} same, {} change, {} denied, {} admitted, {} skipped; {explained}",
            t.pods, t.same, t.changes, t.denied, t.admitted, t.skipped
        );
        out
    }

    /// The pods, each change of each pod, then [`Self::summary`].
    pub fn table(&self) -> String {
        let mut out = String::new();
        let header = ["NAMESPACE", "POD", "OWNER", "RESULT", "ROWS", "DETAIL"].map(str::to_string);
        let cells: Vec<[String; 6]> = (self.pods.iter())
            .map(|p| {
                let rows = p.rows().join(", ");
                let detail = match (&p.reason, &p.admission) {
                    (Some(reason), _) => reason.clone(),
                    (
                        None,
                        Some(Admission {
                            target: Some(m), ..
                        }),
                    ) => format!("denied: {m}"),
                    (
                        None,
                        Some(Admission {
                            current: Some(m), ..
                        }),
                    ) => {
                        format!("admitted; {} denies: {m}", self.from)
                    }
                    _ if p.changes.is_empty() => String::new(),
                    _ => format!("{} changes", p.changes.len()),
                };
                let owner = if p.owner.is_empty() {
                    "-".into()
                } else {
                    p.owner.clone()
                };
                [
                    p.namespace.clone(),
                    p.pod.clone(),
                    owner,
                    p.status.as_str().to_string(),
                    if rows.is_empty() { "-".into() } else { rows },
                    detail,
                ]
            })
            .collect();
        write_table(&mut out, &header, &cells);
        let changed: Vec<[String; 6]> = (self.pods.iter())
            .flat_map(|p| p.changes.iter().map(move |c| (p, c)))
            .map(|(p, c)| {
                [
                    format!("{}/{}", p.namespace, p.pod),
                    container(c.container.as_deref(), c.init),
                    c.field.clone(),
                    c.kind.as_str().to_string(),
                    format!("{} → {}", brief(c.old.as_ref()), brief(c.new.as_ref())),
                    c.causes.text(),
                ]
            })
            .collect();
        if !changed.is_empty() {
            out.push('\n');
            let header =
                ["POD", "CONTAINER", "FIELD", "CHANGE", "OLD → NEW", "ROWS"].map(str::to_string);
            write_table(&mut out, &header, &changed);
        }
        out.push('\n');
        out.push_str(&self.summary());
        out
    }
}

fn container(name: Option<&str>, init: bool) -> String {
    match (name, init) {
        (None, _) => "(pod)".into(),
        (Some(n), true) => format!("{n} (init)"),
        (Some(n), false) => n.into(),
    }
}

fn shown(value: Option<&Value>) -> String {
    value.map_or("(not set)".into(), Value::to_string)
}

/// A value on one line, cut at 60 characters.
fn brief(value: Option<&Value>) -> String {
    const MAX: usize = 60;
    let Some(value) = value else {
        return "-".into();
    };
    let text = value.to_string();
    if text.chars().count() <= MAX {
        return text;
    }
    let cut: String = text.chars().take(MAX - 1).collect();
    format!("{cut}…")
}
