//! The audit's result: one row per pod, the differences grouped by path
//! with how many pods have each, as a table or JSON.

use super::compare::{DiffKind, Difference};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write;

#[derive(Debug, Clone, Copy, Serialize)]
#[cfg_attr(any(test, feature = "oracle"), derive(PartialEq))]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Same,
    Differs,
    Skipped,
}

impl Status {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Status::Same => "same",
            Status::Differs => "differs",
            Status::Skipped => "skipped",
        }
    }
}

#[derive(Debug, Serialize)]
pub struct Row {
    pub namespace: String,
    pub(crate) pod: String,
    /// `Kind/name` of the workload the template came from; empty without one.
    pub(crate) owner: String,
    pub(crate) status: Status,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) reason: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) differences: Vec<Difference>,
}

impl Row {
    pub(crate) fn new(namespace: &str, pod: &str) -> Self {
        Self {
            namespace: namespace.to_string(),
            pod: pod.to_string(),
            owner: String::new(),
            status: Status::Skipped,
            reason: None,
            differences: Vec::new(),
        }
    }
}

/// One path that differs, and on how many pods.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct PathCount {
    pub path: String,
    pub kind: DiffKind,
    pub pods: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub(crate) struct Totals {
    pub pods: usize,
    pub same: usize,
    pub differs: usize,
    pub skipped: usize,
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub(crate) totals: Totals,
    pub(crate) differences: Vec<PathCount>,
    pub pods: Vec<Row>,
}

impl Report {
    pub fn new(pods: Vec<Row>) -> Self {
        let mut totals = Totals {
            pods: pods.len(),
            ..Totals::default()
        };
        let mut counts: BTreeMap<(&str, DiffKind), usize> = BTreeMap::new();
        for row in &pods {
            match row.status {
                Status::Same => totals.same += 1,
                Status::Differs => totals.differs += 1,
                Status::Skipped => totals.skipped += 1,
            }
            for d in &row.differences {
                *counts.entry((d.path.as_str(), d.kind)).or_default() += 1;
            }
        }
        let mut differences: Vec<PathCount> = (counts.into_iter())
            .map(|((path, kind), pods)| PathCount {
                path: path.to_string(),
                kind,
                pods,
            })
            .collect();
        // Most widespread first; ties by path.
        differences.sort_by(|a, b| b.pods.cmp(&a.pods).then_with(|| a.path.cmp(&b.path)));
        Self {
            totals,
            differences,
            pods,
        }
    }

    /// Whether any pod differs (the command then exits 1).
    pub fn differs(&self) -> bool {
        self.totals.differs > 0
    }

    /// The table: the pods, then the differences by path, then the totals.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let detail = |row: &Row| match row.status {
            Status::Same => String::new(),
            Status::Differs => {
                let n = row.differences.len();
                let first = row.differences.first().map_or("", |d| d.path.as_str());
                let more = if n > 1 {
                    format!(" (+{} more)", n - 1)
                } else {
                    String::new()
                };
                let reason = row
                    .reason
                    .as_deref()
                    .map_or(String::new(), |r| format!("{r}; "));
                format!("{reason}{first}{more}")
            }
            Status::Skipped => row.reason.clone().unwrap_or_default(),
        };
        let cells: Vec<[String; 5]> = (self.pods.iter())
            .map(|r| {
                let owner = if r.owner.is_empty() {
                    "-".to_string()
                } else {
                    r.owner.clone()
                };
                let status = r.status.as_str().to_string();
                [r.namespace.clone(), r.pod.clone(), owner, status, detail(r)]
            })
            .collect();
        let header = ["NAMESPACE", "POD", "OWNER", "RESULT", "DETAIL"].map(str::to_string);
        write_table(&mut out, &header, &cells);
        if !self.differences.is_empty() {
            out.push('\n');
            let header = ["DIFFERENCE", "PATH", "PODS"].map(str::to_string);
            let cells: Vec<[String; 3]> = (self.differences.iter())
                .map(|d| {
                    [
                        d.kind.as_str().to_string(),
                        d.path.clone(),
                        d.pods.to_string(),
                    ]
                })
                .collect();
            write_table(&mut out, &header, &cells);
        }
        let t = &self.totals;
        let _ = writeln!(
            out,
            "\n{} pods: {} same, {} differ, {} skipped",
            t.pods, t.same, t.differs, t.skipped
        );
        out
    }
}

/// Columns padded to their widest cell; the last column is not padded.
pub(super) fn write_table<const N: usize>(
    out: &mut String,
    header: &[String; N],
    rows: &[[String; N]],
) {
    let mut widths = header.each_ref().map(|h| h.chars().count());
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for row in std::iter::once(header).chain(rows) {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i + 1 < N {
                let _ = write!(line, "{cell:<width$}   ", width = widths[i]);
            } else {
                line.push_str(cell);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
}
