//! Documents whose anchors nest inside anchored nodes, each level aliasing
//! a list made of aliases (the shape of `loadtest/hostile_yaml.py`):
//!
//! ```yaml
//! s: &s xxxx…
//! e: &e [*s, *s]
//! n: &a1 {k: &b1 {v: *e, w: &a2 {k: &b2 {v: *e}}}}
//! again1: *a1    # `over`: again2, … past the budget the rest fitted
//! ```
//!
//! A reader that keeps a copy of each anchored node holds about `levels`²
//! times one level's expansion, though the document expands to `levels`
//! times it: 1 MB of pod that expands to 58 MiB held 1.7 GiB.

// Each test binary that includes this file uses a part of it.
#![allow(dead_code)]

/// One nested-anchor shape.
pub struct Nested {
    pub levels: usize,
    /// Aliases of the scalar in the list every level aliases.
    pub aliases: usize,
    /// Bytes of the aliased scalar.
    pub scalar: usize,
    /// Bytes of an unaliased scalar beside it, filling the document.
    pub pad: usize,
    /// Aliases of the outermost node after it (0: none).
    pub again: usize,
}

const MIB: usize = 1 << 20;
const MANAGED: &str = "  managedFields:\n  - manager: hostile\n    operation: Apply\n    fieldsType: FieldsV1\n    fieldsV1:\n";

impl Nested {
    /// About `size` bytes of document expanding to at most 60 MiB (within
    /// the default budget) over `levels`, the aliased scalar `scalar` bytes
    /// (the rest of `size` an unaliased pad); `over`: then aliases of the
    /// outermost node that take it past 120 MiB.
    pub fn sized(size: usize, levels: usize, scalar: Option<usize>, over: bool) -> Self {
        Self::expanding(size, levels, scalar, over, 60 * MIB)
    }

    /// [`Nested::sized`], expanding to about `expand` bytes (past a budget
    /// of that size with `over`).
    pub fn expanding(
        size: usize,
        levels: usize,
        scalar: Option<usize>,
        over: bool,
        expand: usize,
    ) -> Self {
        let room = size.saturating_sub(1024 + 40 * levels).max(16);
        let scalar = scalar.unwrap_or(room);
        let pad = room.saturating_sub(scalar);
        // The scalar is read once, then copied by `e` and each level's `v`.
        let copies = ((expand - pad) / scalar).saturating_sub(1).max(2);
        let aliases = (copies / (levels + 1)).max(1);
        let again = if over {
            expand / (levels * aliases * scalar) + 1
        } else {
            0
        };
        Self {
            levels,
            aliases,
            scalar,
            pad,
            again,
        }
    }

    /// Bytes of text the nested node expands to.
    pub fn expands_to(&self) -> usize {
        let level = self.levels * self.aliases * self.scalar;
        self.scalar * (1 + self.aliases) + self.pad + level * (1 + self.again)
    }

    /// The entries `s`, `e`, `n` (and `pad`, `again1`, …), each line at
    /// `indent`.
    pub fn entries(&self, indent: &str) -> String {
        let mut node = "{v: *e}".to_string();
        for i in (1..=self.levels).rev() {
            if i < self.levels {
                node = format!("{{v: *e, w: {node}}}");
            }
            node = format!("&a{i} {{k: &b{i} {node}}}");
        }
        let mut text = format!("{indent}s: &s {}\n", "x".repeat(self.scalar));
        if self.pad > 0 {
            text.push_str(&format!("{indent}pad: {}\n", "x".repeat(self.pad)));
        }
        text.push_str(&format!(
            "{indent}e: &e [{}]\n",
            vec!["*s"; self.aliases].join(", ")
        ));
        text.push_str(&format!("{indent}n: {node}\n"));
        // Beside `n`, not in a list: as deep as it may nest.
        for i in 1..=self.again {
            text.push_str(&format!("{indent}again{i}: *a1\n"));
        }
        text
    }

    /// A Pod holding the node in `metadata.managedFields[0].fieldsV1`, a
    /// field the Pod schema leaves free (nesting 5 deep: the node may have
    /// 29 levels).
    pub fn pod(&self) -> String {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: hostile\n{MANAGED}{}spec:\n  containers:\n  - name: kserve-container\n    image: x\n",
            self.entries("      ")
        )
    }

    /// An inferenceservice-config manifest holding the node where the Pod
    /// does, with `data` (a `data:` block) after it.
    pub fn config_map(&self, data: &str) -> String {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: inferenceservice-config\n  namespace: kserve\n{MANAGED}{}{data}",
            self.entries("      ")
        )
    }

    /// Our settings file, the node in the model volume's claim template's
    /// `managedFields` (nesting 8 deep: 27 levels).
    pub fn settings(&self) -> String {
        format!(
            "modelVolume:\n  ephemeral:\n    volumeClaimTemplate:\n      metadata:\n        managedFields:\n        - manager: hostile\n          operation: Apply\n          fieldsType: FieldsV1\n          fieldsV1:\n{}      spec:\n        accessModes: [ReadWriteOnce]\n        resources: {{requests: {{storage: 1Gi}}}}\n",
            self.entries("            ")
        )
    }
}

/// The `data:` block of a ConfigMap manifest, as written.
pub fn data_block(manifest: &str) -> String {
    let mut out = String::new();
    let mut inside = false;
    for line in manifest.lines() {
        if line.starts_with("data:") {
            inside = true;
        } else if inside && !line.is_empty() && !line.starts_with([' ', '#']) {
            break;
        }
        if inside {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}
