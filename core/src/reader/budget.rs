//! What one read may cost, charged as the reader produces values (not once
//! a document is whole), so an input over budget stops being read at once
//! and memory follows the budget, not the input.
//!
//! Per document: bytes of source text read, nodes produced, bytes of scalar
//! text produced (an alias is charged again each time it is used, so a
//! repeated large scalar costs what its expansion costs), nesting depth.
//! Per input: nodes and scalar text over all its documents. The same meter
//! serves the YAML and the JSON reader.

use std::cell::{Cell, RefCell};

/// The limits of one read. [`Budget::default`] is far above any real
/// cluster object (etcd stores at most 1.5 MiB per object).
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    /// Bytes of source text in one document, and bytes of scalar text it
    /// produces (mapping keys and alias expansions included).
    pub document_bytes: u64,
    /// Nodes (mappings, sequences, scalars; an alias counts what it
    /// expands to) in one document.
    pub document_nodes: u64,
    /// Nesting of mappings and sequences.
    pub depth: usize,
    /// Bytes of scalar text produced over the whole input.
    pub input_bytes: u64,
    /// Nodes produced over the whole input.
    pub input_nodes: u64,
}

impl Default for Budget {
    fn default() -> Self {
        Self {
            document_bytes: 64 << 20,
            document_nodes: 1_000_000,
            depth: super::MAX_DEPTH,
            input_bytes: 256 << 20,
            input_nodes: 16_000_000,
        }
    }
}

/// A budget and what has been charged to it.
#[derive(Debug)]
pub struct Meter {
    budget: Budget,
    document_source: Cell<u64>,
    document_nodes: Cell<u64>,
    document_text: Cell<u64>,
    input_nodes: Cell<u64>,
    input_text: Cell<u64>,
    /// The first refusal, kept so a reader that reports it through a
    /// library's own error type can give it back unchanged.
    refusal: RefCell<Option<OverBudget>>,
}

/// A charge the budget refused: which limit, and its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum OverBudget {
    #[error("more than {} of text in one document", size(*.0))]
    DocumentSource(u64),
    #[error("more than {0} nodes in one document")]
    DocumentNodes(u64),
    #[error("more than {0} nodes in the input")]
    InputNodes(u64),
    #[error("more than {} of text in one document (an alias counts each time it is used)", size(*.0))]
    DocumentText(u64),
    #[error("more than {} of text in the input", size(*.0))]
    InputText(u64),
    #[error("nested deeper than {0} levels")]
    Depth(usize),
}

impl Meter {
    pub fn new(budget: Budget) -> Self {
        Self {
            budget,
            document_source: Cell::new(0),
            document_nodes: Cell::new(0),
            document_text: Cell::new(0),
            input_nodes: Cell::new(0),
            input_text: Cell::new(0),
            refusal: RefCell::new(None),
        }
    }

    pub fn budget(&self) -> &Budget {
        &self.budget
    }

    /// A new document starts: its own counters go back to zero.
    pub fn start_document(&self) {
        self.start_document_with(0);
    }

    /// A new document starts, `carried` bytes of its source already read
    /// (a parser reads ahead before it reports where a document starts):
    /// they stay charged, so no buffer of the document outgrows its budget.
    pub fn start_document_with(&self, carried: u64) {
        self.document_source.set(carried);
        self.document_nodes.set(0);
        self.document_text.set(0);
    }

    /// `n` more bytes of source text were read.
    pub(crate) fn read(&self, n: usize) -> Result<(), OverBudget> {
        let limit = self.budget.document_bytes;
        self.add(
            &self.document_source,
            n as u64,
            limit,
            OverBudget::DocumentSource,
        )
    }

    /// `n` more nodes were produced.
    pub fn nodes(&self, n: u64) -> Result<(), OverBudget> {
        let limit = self.budget.document_nodes;
        self.add(&self.document_nodes, n, limit, OverBudget::DocumentNodes)?;
        let limit = self.budget.input_nodes;
        self.add(&self.input_nodes, n, limit, OverBudget::InputNodes)
    }

    /// `n` more bytes of scalar text were produced.
    pub fn text(&self, n: usize) -> Result<(), OverBudget> {
        let limit = self.budget.document_bytes;
        self.add(
            &self.document_text,
            n as u64,
            limit,
            OverBudget::DocumentText,
        )?;
        let limit = self.budget.input_bytes;
        self.add(&self.input_text, n as u64, limit, OverBudget::InputText)
    }

    /// A collection opens at `depth` (1 for the root).
    pub(crate) fn depth(&self, depth: usize) -> Result<(), OverBudget> {
        if depth > self.budget.depth {
            return Err(self.refuse(OverBudget::Depth(self.budget.depth)));
        }
        Ok(())
    }

    /// Why a charge was refused, if one was.
    pub(crate) fn refusal(&self) -> Option<OverBudget> {
        *self.refusal.borrow()
    }

    fn add(
        &self,
        counter: &Cell<u64>,
        n: u64,
        limit: u64,
        over: fn(u64) -> OverBudget,
    ) -> Result<(), OverBudget> {
        let total = counter.get().saturating_add(n);
        counter.set(total);
        if total > limit {
            return Err(self.refuse(over(limit)));
        }
        Ok(())
    }

    fn refuse(&self, over: OverBudget) -> OverBudget {
        self.refusal.borrow_mut().get_or_insert(over);
        over
    }
}

/// `bytes` as people write it: `64 MiB` when it is whole mebibytes.
pub(crate) fn size(bytes: u64) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{bytes} bytes")
    }
}
