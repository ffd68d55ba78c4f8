//! One YAML document built from its events, within the budget.
//!
//! An anchored node is shared between the document and the anchors
//! ([`Node::Shared`]): defining an anchor copies nothing, however deep
//! anchors nest inside anchored nodes. An alias is charged what its anchor
//! expands to, nodes, text and depth, before it is placed, and is placed as
//! one more reference to the shared node. The copies the aliases stand for
//! are made once, when the whole document becomes a `Value`
//! ([`Builder::finish`]); by then each was charged, so the memory a
//! document takes follows what the budget let in. A copy kept per anchor
//! would not: anchors nested 60 deep around a few aliases of one scalar
//! would hold 60 copies of what the budget counted once.

use super::{at, is_core, resolve, Shared, YamlError, YamlProblem};
use granit_parser::{Event, ScalarStyle, Span};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

/// A node of the document under construction.
#[derive(Clone)]
enum Node {
    Scalar(Value),
    Seq(Vec<Node>),
    Map(BTreeMap<String, Node>),
    /// An anchored node, held by the document and by its anchor (and by
    /// every alias placed so far).
    Shared(Rc<Node>),
}

impl Node {
    fn shared(&self) -> &Node {
        match self {
            Node::Shared(node) => node,
            node => node,
        }
    }

    /// The value, moving out what no other reference holds and copying the
    /// rest.
    fn into_value(self) -> Value {
        match self {
            Node::Scalar(value) => value,
            Node::Seq(items) => Value::Array(items.into_iter().map(Node::into_value).collect()),
            Node::Map(map) => {
                Value::Object(map.into_iter().map(|(k, v)| (k, v.into_value())).collect())
            }
            Node::Shared(node) => match Rc::try_unwrap(node) {
                Ok(node) => node.into_value(),
                Err(node) => node.to_value(),
            },
        }
    }

    fn to_value(&self) -> Value {
        match self {
            Node::Scalar(value) => value.clone(),
            Node::Seq(items) => Value::Array(items.iter().map(Node::to_value).collect()),
            Node::Map(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| (k.clone(), v.to_value()))
                    .collect::<Map<_, _>>(),
            ),
            Node::Shared(node) => node.to_value(),
        }
    }
}

/// A mapping key waiting for its value.
enum Key {
    Name(String),
    Merge,
}

/// A collection being read, with the height of what it holds so far (1
/// for an empty collection; a scalar has height 0).
enum Frame {
    Seq {
        items: Vec<Node>,
        anchor: usize,
        before: Cost,
        height: usize,
    },
    Map {
        map: BTreeMap<String, Node>,
        key: Option<Key>,
        merges: Vec<Node>,
        anchor: usize,
        before: Cost,
        height: usize,
    },
}

/// What an anchored node cost: an alias to it is charged as much again.
#[derive(Clone, Copy)]
struct Cost {
    nodes: u64,
    text: usize,
}

/// An anchored node, what it cost and how deep it nests.
struct Anchor {
    node: Rc<Node>,
    cost: Cost,
    height: usize,
}

/// One document under construction, with its anchors and budget.
pub(super) struct Builder {
    root: Option<Node>,
    stack: Vec<Frame>,
    anchors: HashMap<usize, Anchor>,
    /// What this document has cost so far.
    spent: Cost,
    shared: Rc<Shared>,
}

impl Builder {
    pub(super) fn new(shared: Rc<Shared>) -> Self {
        Self {
            root: None,
            stack: Vec::new(),
            anchors: HashMap::new(),
            spent: Cost { nodes: 0, text: 0 },
            shared,
        }
    }

    /// The document as a value (`None` when it was empty): the anchors are
    /// let go first, so a node that only the document still holds is moved,
    /// not copied.
    pub(super) fn finish(&mut self) -> Option<Value> {
        self.anchors.clear();
        self.root.take().map(Node::into_value)
    }

    pub(super) fn event(&mut self, event: Event<'_>, span: Span) -> Result<(), YamlError> {
        match event {
            Event::Scalar(text, style, anchor, tag) => {
                let cost = Cost {
                    nodes: 1,
                    text: text.len(),
                };
                self.charge(cost, &span)?;
                if self.expects_key() {
                    let merge = style == ScalarStyle::Plain && text == "<<"
                        || tag.as_deref().is_some_and(|t| is_core(t, "merge"));
                    let key = if merge {
                        Key::Merge
                    } else {
                        Key::Name(text.into_owned())
                    };
                    if anchor > 0 {
                        let name = match &key {
                            Key::Name(n) => n.clone(),
                            Key::Merge => "<<".to_string(),
                        };
                        self.define(anchor, Node::Scalar(Value::String(name)), cost, 0);
                    }
                    self.set_key(key);
                    return Ok(());
                }
                let value = resolve(&text, style, tag.as_deref()).map_err(|m| at(&span, m))?;
                let node = self.anchored(anchor, Node::Scalar(value), cost, 0);
                self.push(node, 0, &span)
            }
            Event::Alias(id) => {
                let anchor = self
                    .anchors
                    .get(&id)
                    .ok_or_else(|| at(&span, YamlProblem::UnknownAnchor))?;
                let (node, cost, height) = (anchor.node.clone(), anchor.cost, anchor.height);
                // Charged before it is placed: an alias over budget is
                // never placed, nor ever copied.
                self.charge(cost, &span)?;
                if self.expects_key() {
                    return match node.as_ref() {
                        Node::Scalar(Value::String(name)) => {
                            self.set_key(Key::Name(name.clone()));
                            Ok(())
                        }
                        _ => Err(at(&span, YamlProblem::KeyNotScalar)),
                    };
                }
                self.push(Node::Shared(node), height, &span)
            }
            Event::SequenceStart(_, anchor, _) => {
                // What an alias to it costs includes its own node.
                let before = self.spent;
                self.open(&span)?;
                self.stack.push(Frame::Seq {
                    items: Vec::new(),
                    anchor,
                    before,
                    height: 1,
                });
                Ok(())
            }
            Event::MappingStart(_, anchor, _) => {
                let before = self.spent;
                self.open(&span)?;
                self.stack.push(Frame::Map {
                    map: BTreeMap::new(),
                    key: None,
                    merges: Vec::new(),
                    anchor,
                    before,
                    height: 1,
                });
                Ok(())
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let (node, anchor, before, height) = match self.stack.pop() {
                    Some(Frame::Seq {
                        items,
                        anchor,
                        before,
                        height,
                    }) => (Node::Seq(items), anchor, before, height),
                    Some(Frame::Map {
                        mut map,
                        merges,
                        anchor,
                        before,
                        height,
                        ..
                    }) => {
                        for source in merges {
                            merge_into(&mut map, source).map_err(|m| at(&span, m))?;
                        }
                        (Node::Map(map), anchor, before, height)
                    }
                    None => return Err(at(&span, YamlProblem::EndWithoutStart)),
                };
                let cost = Cost {
                    nodes: self.spent.nodes - before.nodes,
                    text: self.spent.text - before.text,
                };
                let node = self.anchored(anchor, node, cost, height);
                self.push(node, height, &span)
            }
            // Comments are not emitted (`YamlDocuments::new`); stream and
            // document events are handled by the caller.
            _ => Ok(()),
        }
    }

    /// `node`, shared with anchor `id` when it has one (0: none).
    fn anchored(&mut self, id: usize, node: Node, cost: Cost, height: usize) -> Node {
        if id == 0 {
            return node;
        }
        let node = Rc::new(node);
        self.define(id, Node::Shared(node.clone()), cost, height);
        Node::Shared(node)
    }

    fn define(&mut self, id: usize, node: Node, cost: Cost, height: usize) {
        let node = match node {
            Node::Shared(node) => node,
            node => Rc::new(node),
        };
        self.anchors.insert(id, Anchor { node, cost, height });
    }

    /// Charges the budget for what is about to be produced.
    fn charge(&mut self, cost: Cost, span: &Span) -> Result<(), YamlError> {
        self.spent.nodes = self.spent.nodes.saturating_add(cost.nodes);
        self.spent.text = self.spent.text.saturating_add(cost.text);
        let meter = &self.shared.meter;
        meter.nodes(cost.nodes).map_err(|m| at(span, m))?;
        meter.text(cost.text).map_err(|m| at(span, m))
    }

    /// A collection starts: it is a node, and it nests one level deeper.
    fn open(&mut self, span: &Span) -> Result<(), YamlError> {
        if self.expects_key() {
            return Err(at(span, YamlProblem::KeyNotScalar));
        }
        self.charge(Cost { nodes: 1, text: 0 }, span)?;
        let meter = &self.shared.meter;
        meter.depth(self.stack.len() + 1).map_err(|m| at(span, m))
    }

    fn expects_key(&self) -> bool {
        matches!(self.stack.last(), Some(Frame::Map { key: None, .. }))
    }

    fn set_key(&mut self, key: Key) {
        if let Some(Frame::Map { key: slot, .. }) = self.stack.last_mut() {
            *slot = Some(key);
        }
    }

    /// Places `node` (of `height`) where the document expects a value,
    /// refused when it would nest deeper than the budget: an alias to a
    /// deep node, placed deep, nests as deep as the two together.
    fn push(&mut self, node: Node, height: usize, span: &Span) -> Result<(), YamlError> {
        let depth = self.stack.len();
        let merged = matches!(
            self.stack.last(),
            Some(Frame::Map {
                key: Some(Key::Merge),
                ..
            })
        );
        // What the collection holding it grows to: a merge adds the
        // source's entries (of a list of sources, their entries), not the
        // source itself.
        let holder = match (merged, node.shared()) {
            (false, _) => height + 1,
            (true, Node::Seq(_)) => height.saturating_sub(1),
            (true, _) => height,
        };
        if holder > 1 {
            let meter = &self.shared.meter;
            meter.depth(depth + holder - 1).map_err(|m| at(span, m))?;
        }
        match self.stack.last_mut() {
            None => self.root = Some(node),
            Some(Frame::Seq {
                items,
                height: grown,
                ..
            }) => {
                *grown = (*grown).max(holder);
                items.push(node);
            }
            Some(Frame::Map {
                map,
                key,
                merges,
                height: grown,
                ..
            }) => {
                *grown = (*grown).max(holder);
                match key.take() {
                    Some(Key::Merge) => merges.push(node),
                    Some(Key::Name(name)) => {
                        if map.contains_key(&name) {
                            return Err(at(span, YamlProblem::DuplicateKey(name)));
                        }
                        map.insert(name, node);
                    }
                    None => return Err(at(span, YamlProblem::KeyNotScalar)),
                }
            }
        }
        Ok(())
    }
}

/// YAML 1.1 merge: keys the mapping does not have yet, from one mapping or
/// from each of a list of mappings in order (the earlier wins). A shared
/// source (an alias) gives copies of its entries, which its alias was
/// charged for; a source written in place gives its entries themselves.
fn merge_into(map: &mut BTreeMap<String, Node>, source: Node) -> Result<(), YamlProblem> {
    match source {
        Node::Shared(node) => match Rc::try_unwrap(node) {
            Ok(node) => merge_into(map, node),
            Err(node) => merge_shared(map, &node),
        },
        Node::Map(entries) => {
            for (k, v) in entries {
                map.entry(k).or_insert(v);
            }
            Ok(())
        }
        Node::Seq(items) => {
            if items
                .iter()
                .any(|item| !matches!(item.shared(), Node::Map(_)))
            {
                return Err(YamlProblem::MergeListOfNonMappings);
            }
            items.into_iter().try_for_each(|item| merge_into(map, item))
        }
        Node::Scalar(_) => Err(YamlProblem::MergeOfNonMapping),
    }
}

fn merge_shared(map: &mut BTreeMap<String, Node>, source: &Node) -> Result<(), YamlProblem> {
    match source.shared() {
        Node::Map(entries) => {
            for (k, v) in entries {
                if !map.contains_key(k) {
                    map.insert(k.clone(), v.clone());
                }
            }
            Ok(())
        }
        Node::Seq(items) => {
            if items
                .iter()
                .any(|item| !matches!(item.shared(), Node::Map(_)))
            {
                return Err(YamlProblem::MergeListOfNonMappings);
            }
            items.iter().try_for_each(|item| merge_shared(map, item))
        }
        _ => Err(YamlProblem::MergeOfNonMapping),
    }
}
