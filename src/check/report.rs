//! What `check` prints: one line per check, ✔ passed, ⚠ a warning (exit
//! code 0 all the same), ✖ failed with what to do, – skipped because what
//! it needs is missing (said why); as text or JSON.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Status {
    Pass,
    Warn,
    Fail,
    Skip,
}

impl Status {
    fn mark(self) -> &'static str {
        match self {
            Status::Pass => "✔",
            Status::Warn => "⚠",
            Status::Fail => "✖",
            Status::Skip => "–",
        }
    }
}

/// One check's result. `id` is stable (the JSON's key for scripts);
/// `fix` says what to do, on a warning or a failure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Line {
    pub id: &'static str,
    pub status: Status,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl Line {
    pub(crate) fn pass(id: &'static str, message: impl Into<String>) -> Self {
        Self::new(id, Status::Pass, message, None)
    }

    pub(crate) fn warn(
        id: &'static str,
        message: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        Self::new(id, Status::Warn, message, Some(fix.into()))
    }

    pub(crate) fn fail(
        id: &'static str,
        message: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        Self::new(id, Status::Fail, message, Some(fix.into()))
    }

    pub(crate) fn skip(id: &'static str, message: impl Into<String>) -> Self {
        Self::new(id, Status::Skip, message, None)
    }

    fn new(
        id: &'static str,
        status: Status,
        message: impl Into<String>,
        fix: Option<String>,
    ) -> Self {
        Self {
            id,
            status,
            message: message.into(),
            fix,
        }
    }
}

/// Every line of one run, with what was checked.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Report {
    /// The API server, as the kube client reached it.
    pub server: String,
    /// Its version (`gitVersion`), when it answered.
    pub version: String,
    pub namespace: String,
    pub name: String,
    pub checks: Vec<Line>,
}

impl Report {
    pub(crate) fn count(&self, status: Status) -> usize {
        self.checks.iter().filter(|l| l.status == status).count()
    }

    /// Exit code 1: a check failed (warnings and skips do not count).
    pub(crate) fn failed(&self) -> bool {
        self.count(Status::Fail) > 0
    }

    pub(crate) fn text(&self) -> String {
        let mut out = format!(
            "kserve-injector check: {}/{} on {} ({})\n",
            self.namespace, self.name, self.server, self.version
        );
        for line in &self.checks {
            out.push_str(&format!(
                "{} {}: {}\n",
                line.status.mark(),
                line.id,
                line.message
            ));
            if let (Some(fix), Status::Warn | Status::Fail) = (&line.fix, line.status) {
                out.push_str(&format!("    fix: {fix}\n"));
            }
        }
        out.push_str(&format!(
            "{} passed, {} warnings, {} failed, {} skipped\n",
            self.count(Status::Pass),
            self.count(Status::Warn),
            self.count(Status::Fail),
            self.count(Status::Skip)
        ));
        out
    }

    pub(crate) fn json(&self) -> String {
        let summary = serde_json::json!({
            "passed": self.count(Status::Pass),
            "warnings": self.count(Status::Warn),
            "failed": self.count(Status::Fail),
            "skipped": self.count(Status::Skip),
        });
        let mut value = serde_json::to_value(self).unwrap_or_default();
        if let Some(map) = value.as_object_mut() {
            map.insert("summary".into(), summary);
        }
        let mut text = serde_json::to_string_pretty(&value).unwrap_or_default();
        text.push('\n');
        text
    }
}
