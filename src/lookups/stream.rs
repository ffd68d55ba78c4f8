//! LIST, WATCH and GET against the API server, each object decoded on its
//! own as it arrives (`wire.rs`).
//!
//! Hand-written rather than kube-runtime's `watcher` because the watcher
//! reads a LIST page whole (`Api::list` buffers the body, then decodes
//! every item into the full API type): 500 ServiceAccounts of 1.4 MB make a
//! 700 MB page, which no memory limit survives, and a relist at start would
//! OOM-kill the process again at every restart. Here a LIST page is parsed
//! as it streams (serde_json reading the body through tokio-util's
//! `SyncIoBridge` on the blocking pool), one item's text at a time, and a
//! watch event is one line of at most [`MAX_EVENT_BYTES`] (tokio-util's
//! `LinesCodec`), so what a LIST or WATCH holds beyond the kept objects is
//! one object's text, which the API server bounds.

use super::reduce::Collection;
use super::wire::Head;
use futures::{StreamExt, TryStreamExt};
use http_body_util::BodyExt;
use hyper::http;
use kube::client::Body;
use kube::core::params::{ListParams, WatchParams};
use kube::core::{Request, Status};
use kube::Client;
use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;

/// The longest watch event line read: the API server stores objects of at
/// most 1.5 MiB (etcd's request limit), and an object's JSON (base64 data,
/// escapes) is at most a few times that.
pub(super) const MAX_EVENT_BYTES: usize = 8 << 20;

/// Objects per LIST page: the page is streamed, so its size bounds only the
/// API server's work per request, not what is held here.
const PAGE_SIZE: u32 = 500;

/// The server ends a watch after this many seconds; it is then resumed
/// from the last resourceVersion seen.
const WATCH_SECONDS: u32 = 290;

/// Longest error body read from a failed request.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// Why a LIST or WATCH ended.
#[derive(Debug, thiserror::Error)]
pub(super) enum StreamError {
    #[error(transparent)]
    Api(#[from] kube::Error),
    #[error("request: {0}")]
    Request(#[from] kube::core::request::Error),
    #[error("reading the body: {0}")]
    Read(#[from] std::io::Error),
    #[error("a watch event longer than {MAX_EVENT_BYTES} bytes or unreadable: {0}")]
    Line(#[from] tokio_util::codec::LinesCodecError),
    #[error("decoding the response: {0}")]
    Json(#[from] serde_json::Error),
    /// The watch's resourceVersion is too old (410): list again.
    #[error("the watch's resourceVersion expired")]
    Gone,
    #[error("the watch ended with an error: {0}")]
    Event(String),
    /// The cache gave up at its byte budget while the LIST streamed.
    #[error("the cache went over its budget")]
    OverBudget,
    /// The API server does not offer streaming lists (its WatchList
    /// feature is off): list in pages instead.
    #[error("the API server refused a streaming list: {0}")]
    NoStreamingLists(String),
    #[error("the listing task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
}

/// The status and body of a failed request as kube's own error.
async fn checked(res: http::Response<Body>) -> Result<http::Response<Body>, kube::Error> {
    let code = res.status();
    if code.is_success() {
        return Ok(res);
    }
    let body = http_body_util::Limited::new(res.into_body(), MAX_ERROR_BODY);
    let text = match body.collect().await {
        Ok(b) => String::from_utf8_lossy(&b.to_bytes()).into_owned(),
        Err(_) => String::new(),
    };
    let status = serde_json::from_str::<Status>(&text)
        .unwrap_or_else(|_| Status::failure(&text, "").with_code(code.as_u16()));
    Err(kube::Error::Api(Box::new(status)))
}

async fn send(
    client: &Client,
    req: http::Request<Vec<u8>>,
) -> Result<http::Response<Body>, kube::Error> {
    checked(client.send(req.map(Body::from)).await?).await
}

/// One GET's body, or `None` for a 404; every frame is handed to `charge`
/// as it arrives, which stops the read by returning an error.
pub(super) async fn get<E>(
    client: &Client,
    url: &str,
    name: &str,
    mut charge: impl FnMut(usize) -> Result<(), E>,
) -> Result<Option<Vec<u8>>, GetError<E>> {
    let req = Request::new(url)
        .get(name, &Default::default())
        .map_err(|e| GetError::Api(kube::Error::BuildRequest(e)))?;
    let res = match send(client, req).await {
        Ok(res) => res,
        Err(kube::Error::Api(s)) if s.code == 404 => return Ok(None),
        Err(e) => return Err(GetError::Api(e)),
    };
    let mut body = res.into_body();
    let mut out = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| GetError::Api(kube::Error::Service(Box::new(e))))?;
        if let Some(data) = frame.data_ref() {
            charge(data.len()).map_err(GetError::Charge)?;
            out.extend_from_slice(data);
        }
    }
    Ok(Some(out))
}

#[derive(Debug)]
pub(super) enum GetError<E> {
    Api(kube::Error),
    Charge(E),
}

/// The list's own metadata.
#[derive(Deserialize, Default)]
struct ListMeta {
    #[serde(default, rename = "resourceVersion")]
    resource_version: String,
    #[serde(default, rename = "continue")]
    next: Option<String>,
}

/// A LIST body: `each` gets every item's text as the body is parsed.
struct ListSeed<'f, F>(&'f mut F);

impl<'de, F: FnMut(&str) -> Result<(), StreamError>> DeserializeSeed<'de> for ListSeed<'_, F> {
    type Value = ListMeta;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<ListMeta, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, F: FnMut(&str) -> Result<(), StreamError>> Visitor<'de> for ListSeed<'_, F> {
    type Value = ListMeta;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a list")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ListMeta, A::Error> {
        let mut meta = ListMeta::default();
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            match &*key {
                "metadata" => meta = map.next_value()?,
                "items" => map.next_value_seed(Items(&mut *self.0))?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(meta)
    }
}

struct Items<'f, F>(&'f mut F);

impl<'de, F: FnMut(&str) -> Result<(), StreamError>> DeserializeSeed<'de> for Items<'_, F> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de, F: FnMut(&str) -> Result<(), StreamError>> Visitor<'de> for Items<'_, F> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a list of objects")
    }
    fn visit_none<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(item) = seq.next_element::<Box<RawValue>>()? {
            (self.0)(item.get()).map_err(serde::de::Error::custom)?;
        }
        Ok(())
    }
}

/// A complete LIST, page after page, each item handed to `each` (with its
/// identity) as it is parsed; returns the list's resourceVersion. `each`
/// runs on the blocking pool.
pub(super) async fn list<F>(
    client: &Client,
    at: &Collection,
    mut each: F,
) -> Result<String, StreamError>
where
    F: FnMut(&Head, &str) -> Result<(), StreamError> + Send + 'static,
{
    let mut next: Option<String> = None;
    loop {
        let mut lp = ListParams::default().limit(PAGE_SIZE);
        if let Some(fields) = at.fields {
            lp = lp.fields(fields);
        }
        if let Some(token) = next.as_deref() {
            lp = lp.continue_token(token);
        }
        let req = Request::new(&at.url).list(&lp)?;
        let res = send(client, req).await?;
        let body = res
            .into_body()
            .into_data_stream()
            .map_err(std::io::Error::other);
        let reader = tokio_util::io::SyncIoBridge::new(tokio_util::io::StreamReader::new(body));
        let (meta, given_back) = tokio::task::spawn_blocking(move || {
            let mut item = |text: &str| -> Result<(), StreamError> {
                let head = Head::parse(text)?;
                each(&head, text)
            };
            let read = std::io::BufReader::new(reader);
            let mut de = serde_json::Deserializer::from_reader(read);
            let meta = ListSeed(&mut item).deserialize(&mut de);
            let meta = meta.and_then(|m| de.end().map(|()| m));
            (meta, each)
        })
        .await?;
        each = given_back;
        let meta = meta?;
        match meta.next.filter(|t| !t.is_empty()) {
            Some(token) => next = Some(token),
            None => return Ok(meta.resource_version),
        }
    }
}

/// One watch event line.
#[derive(Deserialize)]
struct Event<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow)]
    object: &'a RawValue,
}

/// What a watch event asks of the cache.
pub(super) enum Change<'a> {
    Apply(&'a Head, &'a str),
    Delete(&'a Head),
}

/// A watch's event lines as they arrive, each at most [`MAX_EVENT_BYTES`].
type Lines =
    futures::stream::BoxStream<'static, Result<String, tokio_util::codec::LinesCodecError>>;

/// Opens a WATCH of `at` from `version` (its field selector applied).
async fn open(
    client: &Client,
    at: &Collection,
    mut wp: WatchParams,
    version: &str,
) -> Result<Lines, StreamError> {
    wp = wp.timeout(WATCH_SECONDS);
    if let Some(fields) = at.fields {
        wp = wp.fields(fields);
    }
    let mut req = Request::new(&at.url).watch(&wp, version)?;
    // One JSON object per line, as the line codec reads them.
    req.headers_mut().insert(
        http::header::ACCEPT_ENCODING,
        http::HeaderValue::from_static("identity"),
    );
    let res = send(client, req).await?;
    let body = res
        .into_body()
        .into_data_stream()
        .map_err(std::io::Error::other);
    let codec = tokio_util::codec::LinesCodec::new_with_max_length(MAX_EVENT_BYTES);
    Ok(tokio_util::codec::FramedRead::new(tokio_util::io::StreamReader::new(body), codec).boxed())
}

/// The next event line, `None` once the server ended the watch (also
/// mid-chunk, as it does at a long watch's timeout).
async fn next_line(lines: &mut Lines) -> Result<Option<String>, StreamError> {
    while let Some(line) = lines.next().await {
        match line {
            Ok(line) if line.trim().is_empty() => continue,
            Ok(line) => return Ok(Some(line)),
            Err(tokio_util::codec::LinesCodecError::Io(e))
                if e.kind() == std::io::ErrorKind::UnexpectedEof =>
            {
                return Ok(None)
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(None)
}

/// One event line decoded; an ERROR event is the watch's end.
fn decode(line: &str) -> Result<Event<'_>, StreamError> {
    let event: Event = serde_json::from_str(line)?;
    if event.kind == "ERROR" {
        let status: Status = serde_json::from_str(event.object.get())?;
        return Err(match status.code {
            410 => StreamError::Gone,
            _ => StreamError::Event(crate::log_text::bounded(&status.message).to_string()),
        });
    }
    Ok(event)
}

/// Watches from `version` until the server ends the watch (then `Ok`, with
/// `version` at the last one seen, to resume from) or an error.
pub(super) async fn watch(
    client: &Client,
    at: &Collection,
    version: &mut String,
    mut change: impl FnMut(Change<'_>) -> Result<(), StreamError>,
) -> Result<(), StreamError> {
    let mut lines = open(client, at, WatchParams::default(), version).await?;
    while let Some(line) = next_line(&mut lines).await? {
        let event = decode(&line)?;
        let text = event.object.get();
        let head = Head::parse(text)?;
        match &*event.kind {
            "ADDED" | "MODIFIED" => change(Change::Apply(&head, text))?,
            "DELETED" => change(Change::Delete(&head))?,
            _ => {}
        }
        if !head.resource_version().is_empty() {
            *version = head.resource_version().to_string();
        }
    }
    Ok(())
}

/// The annotation on the bookmark that ends a streaming list's objects
/// (apimachinery's `metav1.InitialEventsAnnotationKey`).
const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

/// A BOOKMARK event's object: its resourceVersion and whether it ends the
/// initial events.
#[derive(Deserialize)]
struct Bookmark {
    metadata: BookmarkMeta,
}

#[derive(Deserialize)]
struct BookmarkMeta {
    #[serde(default, rename = "resourceVersion")]
    resource_version: String,
    #[serde(default)]
    annotations: BookmarkAnnotations,
}

#[derive(Deserialize, Default)]
struct BookmarkAnnotations {
    #[serde(default, rename = "k8s.io/initial-events-end")]
    end: Option<String>,
}

/// A complete listing as a streaming list (KEP-3157 `sendInitialEvents`,
/// the API server's `WatchList`: beta and on by default in 1.32 and since
/// 1.34): a WATCH that begins with an ADDED event for every object and then
/// a bookmark carrying the listing's resourceVersion. Each object goes to
/// `each` as its line arrives; returns that resourceVersion, from which
/// `watch` goes on (a new WATCH: one more request per listing, and the
/// listing reads like `list`'s). The server answers 422 where the feature is
/// off (1.31, 1.33): [`StreamError::NoStreamingLists`].
pub(super) async fn streaming_list<F>(
    client: &Client,
    at: &Collection,
    mut each: F,
) -> Result<String, StreamError>
where
    F: FnMut(&Head, &str) -> Result<(), StreamError>,
{
    let mut lines = match open(client, at, WatchParams::streaming_lists(), "").await {
        Err(StreamError::Api(kube::Error::Api(s))) if s.code == 422 => {
            return Err(StreamError::NoStreamingLists(
                crate::log_text::bounded(&s.message).to_string(),
            ))
        }
        other => other?,
    };
    while let Some(line) = next_line(&mut lines).await? {
        let event = decode(&line)?;
        let text = event.object.get();
        match &*event.kind {
            "ADDED" | "MODIFIED" => each(&Head::parse(text)?, text)?,
            "BOOKMARK" => {
                let mark: Bookmark = serde_json::from_str(text)?;
                if mark.metadata.annotations.end.as_deref() == Some("true") {
                    return Ok(mark.metadata.resource_version);
                }
            }
            other => {
                return Err(StreamError::Event(format!(
                    "a {} event before the streaming list's {INITIAL_EVENTS_END} bookmark",
                    crate::log_text::bounded(other)
                )))
            }
        }
    }
    Err(StreamError::Event(format!(
        "the streaming list ended before its {INITIAL_EVENTS_END} bookmark"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bookmark_that_ends_a_streaming_list_is_told_from_other_bookmarks() {
        let end = r#"{"type":"BOOKMARK","object":{"kind":"ServiceAccount","apiVersion":"v1","metadata":{"resourceVersion":"42","creationTimestamp":null,"annotations":{"k8s.io/initial-events-end":"true"}}}}"#;
        let plain = r#"{"type":"BOOKMARK","object":{"kind":"ServiceAccount","apiVersion":"v1","metadata":{"resourceVersion":"43"}}}"#;
        let mark = |line| -> Bookmark {
            let event = decode(line).unwrap();
            assert_eq!(event.kind, "BOOKMARK");
            serde_json::from_str(event.object.get()).unwrap()
        };
        let ended = mark(end);
        assert_eq!(ended.metadata.annotations.end.as_deref(), Some("true"));
        assert_eq!(ended.metadata.resource_version, "42");
        assert_eq!(mark(plain).metadata.annotations.end, None);
    }

    #[test]
    fn an_error_event_ends_the_watch_and_410_asks_for_a_relist() {
        let gone = r#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old resource version","reason":"Expired","code":410}}"#;
        assert!(matches!(decode(gone), Err(StreamError::Gone)));
        let other = r#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","message":"internal","code":500}}"#;
        assert!(matches!(decode(other), Err(StreamError::Event(m)) if m == "internal"));
    }
}
