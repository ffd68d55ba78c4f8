//! The reader's budget as flags, for `mutate` and `audit` (an audit over a
//! big namespace may need more than the defaults).

use kserve_injector_core::reader::Budget;

/// What one input may cost the reader (see docs/operations.md, "Limits").
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Input limits")]
pub struct BudgetArgs {
    /// Most bytes in one document: its source text, and the text its
    /// values expand to (an alias counted each time it is used).
    /// Example: --max-document-bytes 268435456
    #[arg(long, value_name = "BYTES", default_value_t = Budget::default().document_bytes,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub max_document_bytes: u64,
    /// Most nodes (mappings, sequences, scalars) in one document.
    /// Example: --max-document-nodes 4000000
    #[arg(long, value_name = "N", default_value_t = Budget::default().document_nodes,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub max_document_nodes: u64,
    /// Most bytes of text in all the documents of one input together.
    /// Example: --max-input-bytes 4294967296
    #[arg(long, value_name = "BYTES", default_value_t = Budget::default().input_bytes,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub max_input_bytes: u64,
    /// Most nodes in all the documents of one input together.
    /// Example: --max-input-nodes 64000000
    #[arg(long, value_name = "N", default_value_t = Budget::default().input_nodes,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub max_input_nodes: u64,
}

impl BudgetArgs {
    pub fn budget(&self) -> Budget {
        Budget {
            document_bytes: self.max_document_bytes,
            document_nodes: self.max_document_nodes,
            input_bytes: self.max_input_bytes,
            input_nodes: self.max_input_nodes,
            ..Budget::default()
        }
    }
}
