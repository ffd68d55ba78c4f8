use super::*;
use axum::http::header::CONTENT_TYPE;
use http_body_util::StreamBody;
use hyper::body::Frame;
use kserve_injector_core::Inputs;
use std::time::Duration;

#[tokio::test]
async fn a_request_dropped_unanswered_leaves_the_in_flight_count() {
    let defaults = crate::server::args::ServeArgs::try_parse_from(Vec::<&str>::new());
    let mut inputs = RouterInputs::new(Inputs::default(), &defaults.expect("defaults").limits);
    inputs.limits = crate::server::limits::Limits {
        max_connections: 1,
        max_concurrent_requests: 4,
        max_buffered_bytes: 1 << 20,
        large_reviews: 1,
        request_timeout: Duration::from_secs(60),
        body_pace: crate::server::limits::Pace {
            timeout: Duration::from_secs(60),
            min_rate: 1,
        },
    };
    let service = webhook(&inputs);
    // A body that never ends, as from a client that stalls and resets.
    let body = StreamBody::new(futures::stream::pending::<Result<Frame<Bytes>, Infallible>>());
    let req = Request::post("/mutate-pods")
        .header(CONTENT_TYPE, "application/json")
        .body(body)
        .expect("request");
    let mut answering = service.reply(req, None);
    assert!((&mut answering).now_or_never().is_none());
    assert_eq!(inputs.metrics.in_flight.get(), 1);
    drop(answering);
    assert_eq!(inputs.metrics.in_flight.get(), 0);
}

mod review;
