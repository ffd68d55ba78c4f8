use super::*;
use http_body_util::{Full, StreamBody};
use hyper::body::Frame;
use std::convert::Infallible;
use std::time::Duration;

fn chunked(
    chunks: &[&'static str],
) -> StreamBody<impl futures::Stream<Item = Result<Frame<Bytes>, Infallible>> + Unpin> {
    let frames = chunks
        .iter()
        .map(|c| Ok(Frame::data(Bytes::from_static(c.as_bytes()))));
    StreamBody::new(futures::stream::iter(frames.collect::<Vec<_>>()))
}

const PACE: Pace = Pace {
    timeout: Duration::from_secs(1),
    min_rate: 1 << 20,
};

fn now() -> Arrival {
    Arrival {
        share: None,
        start: Instant::now(),
    }
}

#[tokio::test]
async fn a_body_in_one_frame_is_kept_and_one_in_several_is_joined() {
    let budget = Budget::new(1024);
    let one = Full::new(Bytes::from_static(b"{\"kind\":\"AdmissionReview\"}"));
    let (body, held) = read_body(&budget, &now(), &PACE, one)
        .await
        .expect("one frame");
    assert_eq!(&body[..], b"{\"kind\":\"AdmissionReview\"}");
    // Not copied: the frame's own bytes.
    assert_eq!(body.as_ptr(), b"{\"kind\":\"AdmissionReview\"}".as_ptr());
    assert_eq!(held.bytes(), body.len());
    drop(held);

    let several = chunked(&["{\"ki", "", "nd\":", "1}"]);
    let (body, held) = read_body(&budget, &now(), &PACE, several)
        .await
        .expect("several frames");
    assert_eq!(&body[..], b"{\"kind\":1}");
    // The buffer grew with what arrived, and what it holds is charged.
    assert!(held.bytes() >= body.len() && held.bytes() <= 2 * body.len());
}

#[tokio::test]
async fn a_declared_length_is_not_allocated_or_charged_before_it_arrives() {
    let budget = Budget::new(8 << 20);
    // Declares 7,000,000 bytes; only these arrive before the end.
    let body = http_body_util::Limited::new(chunked(&["{\"a\":", "1}"]), 7_000_000);
    let (body, held) = read_body(&budget, &now(), &PACE, body).await.expect("read");
    assert_eq!(&body[..], b"{\"a\":1}");
    assert!(held.bytes() <= 2 * body.len(), "charged {}", held.bytes());
    assert!(budget.available() >= (8 << 20) - 2 * body.len());
}

#[tokio::test]
async fn an_empty_body_in_frames_or_none_is_refused() {
    let budget = Budget::new(1024);
    for body in [chunked(&[]), chunked(&["", ""])] {
        let refused = read_body(&budget, &now(), &PACE, body)
            .await
            .expect_err("empty");
        assert_eq!(refused.0, StatusCode::BAD_REQUEST);
    }
}

#[tokio::test]
async fn bytes_beyond_the_budget_are_refused_503() {
    let budget = Budget::new(16);
    let refused = read_body(
        &budget,
        &now(),
        &PACE,
        chunked(&["0123456789", "0123456789"]),
    )
    .await
    .expect_err("over the budget");
    assert_eq!(refused.0, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        budget.available(),
        16,
        "the refused body's bytes were given back"
    );
}

#[tokio::test]
async fn a_body_is_due_at_its_timeout_plus_its_bytes_at_the_minimum_rate() {
    let pace = Pace {
        timeout: Duration::from_secs(1),
        min_rate: 1000,
    };
    let start = Instant::now();
    assert_eq!(pace.deadline(start, 0), start + Duration::from_secs(1));
    assert_eq!(
        pace.deadline(start, 500),
        start + Duration::from_millis(1500)
    );
    // A body that stops after its first frame falls behind. Its head came
    // 950 ms ago, so it is due 57 ms from now: 1 s plus its 7 bytes at
    // 1000 bytes a second (a real clock: a timer never fires early).
    let (mut tx, body) = http_body_util::channel::Channel::<Bytes, Infallible>::new(1);
    tx.send_data(Bytes::from_static(b"{\"kind\""))
        .await
        .unwrap();
    let budget = Budget::new(1024);
    let arrival = Arrival {
        share: None,
        start: Instant::now() - Duration::from_millis(950),
    };
    let refused = read_body(&budget, &arrival, &pace, body)
        .await
        .expect_err("stalled");
    assert_eq!(refused.0, StatusCode::REQUEST_TIMEOUT);
    let waited = arrival.start.elapsed();
    assert!(
        waited >= Duration::from_millis(1007) && waited < Duration::from_secs(10),
        "{waited:?}"
    );
    drop(tx);
}

#[tokio::test]
async fn a_body_of_an_evicted_connection_still_arriving_is_answered_503() {
    let (_tx, body) = http_body_util::channel::Channel::<Bytes, Infallible>::new(1);
    let share = Arc::new(Share::default());
    let arrival = Arrival {
        share: Some(share.clone()),
        start: Instant::now(),
    };
    let budget = Budget::new(1024);
    let reading = read_body(&budget, &arrival, &PACE, body);
    share.evict.cancel();
    let refused = reading.await.expect_err("evicted");
    assert_eq!(refused.0, StatusCode::SERVICE_UNAVAILABLE);
}
