//! Keep-alive after an error answer: a request the webhook refuses without
//! needing its body (unknown path, wrong method, wrong content type) must
//! leave the connection usable for the next one, on HTTP/1.1 and HTTP/2.

use crate::support::*;
use http_body_util::channel::Channel;
use http_body_util::BodyExt;
use hyper::body::Bytes;
use hyper::{Request, StatusCode};
use std::time::Duration;

/// Enough rounds to catch a failure that happens once in twenty with
/// near certainty (0.95^200 ≈ 3e-5).
const ROUNDS: usize = 200;

/// A body whose bytes come in two frames, the second after the request head
/// has been sent and the server has had a moment to answer without it: the
/// way a real client's body trails its head on a busy network.
fn trailing_body(bytes: Vec<u8>) -> Body {
    let (mut sender, body) = Channel::<Bytes>::new(1);
    tokio::spawn(async move {
        let half = bytes.len() / 2;
        let bytes = Bytes::from(bytes);
        let _ = sender.send_data(bytes.slice(..half)).await;
        tokio::time::sleep(Duration::from_millis(1)).await;
        let _ = sender.send_data(bytes.slice(half..)).await;
    });
    body.boxed()
}

fn request(
    method: &str,
    path: &str,
    content_type: &str,
    body: Vec<u8>,
) -> Result<Request<Body>, Error> {
    Ok(Request::builder()
        .method(method)
        .uri(format!("https://localhost{path}"))
        .header("content-type", content_type)
        .body(trailing_body(body))?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_request_with_a_body_leaves_the_connection_usable_every_time() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let (server, ca) = start_self_signed(tmp.path(), &["--shutdown-delay", "0s"]).await?;
    let (_, review) = sample_review()?;
    let refused = [
        (
            "POST",
            "/no-such-path",
            "application/json",
            StatusCode::NOT_FOUND,
        ),
        (
            "PUT",
            "/mutate-pods",
            "application/json",
            StatusCode::METHOD_NOT_ALLOWED,
        ),
        (
            "POST",
            "/mutate-pods",
            "text/plain",
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
        ),
    ];
    for http in Http::BOTH {
        let mut client = Client::open(server.local_addr(), &ca, http).await?;
        for round in 0..ROUNDS {
            let (method, path, content_type, expected) = refused[round % refused.len()];
            let wrong = request(method, path, content_type, review.clone())?;
            let (status, _) = client
                .call(wrong)
                .await
                .map_err(|e| fail(format!("{http:?} round {round}: {method} {path}: {e}")))?;
            ensure(status == expected, || {
                format!("{http:?} round {round}: {method} {path}: {status}")
            })?;
            let right = request("POST", "/mutate-pods", "application/json", review.clone())?;
            let (status, _) = client.call(right).await.map_err(|e| {
                fail(format!(
                    "{http:?} round {round}: reusing the connection after {expected}: {e}"
                ))
            })?;
            ensure(status == StatusCode::OK, || {
                format!("{http:?} round {round}: after {expected}: {status}")
            })?;
        }
    }
    stop(server).await
}
