use super::*;
use http_body_util::{Full, StreamBody};
use hyper::body::Frame;
use std::convert::Infallible;

fn chunked(
    chunks: &[&'static str],
) -> StreamBody<impl futures::Stream<Item = Result<Frame<Bytes>, Infallible>> + Unpin> {
    let frames = chunks
        .iter()
        .map(|c| Ok(Frame::data(Bytes::from_static(c.as_bytes()))));
    StreamBody::new(futures::stream::iter(frames.collect::<Vec<_>>()))
}

#[tokio::test]
async fn a_body_in_one_frame_is_kept_and_one_in_several_is_joined() {
    let budget = Arc::new(Semaphore::new(1024));
    let one = Full::new(Bytes::from_static(b"{\"kind\":\"AdmissionReview\"}"));
    let (body, held) = read_body(&budget, one).await.expect("one frame");
    assert_eq!(&body[..], b"{\"kind\":\"AdmissionReview\"}");
    // Not copied: the frame's own bytes.
    assert_eq!(body.as_ptr(), b"{\"kind\":\"AdmissionReview\"}".as_ptr());
    assert_eq!(held.num_permits(), body.len());
    drop(held);

    let (body, held) = read_body(&budget, chunked(&["{\"ki", "", "nd\":", "1}"]))
        .await
        .expect("several frames");
    assert_eq!(&body[..], b"{\"kind\":1}");
    assert_eq!(held.num_permits(), body.len());
}

#[tokio::test]
async fn an_empty_body_in_frames_or_none_is_refused() {
    let budget = Arc::new(Semaphore::new(1024));
    for body in [chunked(&[]), chunked(&["", ""])] {
        let refused = read_body(&budget, body).await.expect_err("empty");
        assert_eq!(refused.0, StatusCode::BAD_REQUEST);
    }
}
