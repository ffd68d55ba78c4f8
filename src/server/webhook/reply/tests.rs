use super::*;
use crate::server::webhook::share::Budget;
use std::task::Waker;

fn chunks(body: &mut ReplyBody) -> Vec<Bytes> {
    let mut cx = Context::from_waker(Waker::noop());
    let mut out = Vec::new();
    while let Poll::Ready(Some(Ok(frame))) = Pin::new(&mut *body).poll_frame(&mut cx) {
        out.push(frame.into_data().expect("data"));
    }
    out
}

fn answer(len: usize) -> Bytes {
    Bytes::from((0..len).map(|i| (i % 251) as u8).collect::<Vec<u8>>())
}

#[test]
fn a_small_answer_is_handed_whole_without_a_copy() {
    let bytes = answer(1500);
    let mut body = ReplyBody::new(bytes.clone());
    let got = chunks(&mut body);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].as_ptr(), bytes.as_ptr());
    assert!(body.is_end_stream());
}

#[test]
fn a_large_answer_is_handed_in_copies_that_do_not_pin_it() {
    let bytes = answer(5 * CHUNK + 7);
    let mut body = ReplyBody::new(bytes.clone());
    let got = chunks(&mut body);
    assert_eq!(got.len(), 6);
    assert!(got.iter().all(|c| c.len() <= CHUNK));
    let range = bytes.as_ptr_range();
    assert!(got.iter().all(|c| !range.contains(&c.as_ptr())));
    assert_eq!(got.concat(), bytes.to_vec());
}

#[test]
fn over_http2_a_small_answer_goes_whole() {
    for len in [2, 1500, HANDED_WHOLE] {
        let bytes = answer(len);
        let mut body = ReplyBody::new(bytes.clone());
        body.last_byte_alone();
        let got = chunks(&mut body);
        assert_eq!(got.len(), 1, "len {len}");
        assert_eq!(got.concat(), bytes.to_vec(), "len {len}");
    }
}

#[test]
fn over_http2_the_last_byte_of_a_larger_answer_goes_alone_and_pins_nothing() {
    for len in [HANDED_WHOLE + 1, CHUNK, CHUNK + 1, 3 * CHUNK] {
        let bytes = answer(len);
        let mut body = ReplyBody::new(bytes.clone());
        body.last_byte_alone();
        let got = chunks(&mut body);
        let last = got.last().expect("chunks");
        assert_eq!(last.len(), 1, "len {len}");
        assert!(!bytes.as_ptr_range().contains(&last.as_ptr()));
        assert_eq!(got.concat(), bytes.to_vec(), "len {len}");
    }
}

#[test]
fn an_answer_is_counted_until_its_body_is_dropped() {
    let metrics = Arc::new(Metrics::new());
    let outbox = Arc::new(Outbox::new(metrics.clone()));
    let budget = Budget::new(1 << 20);
    let len = 3 * CHUNK;
    let mut held = Budget::hold(None);
    budget.take(&mut held, len).expect("fits");
    let mut body = ReplyBody::new(answer(len)).holding(held);
    body.queue_in(&outbox);
    assert_eq!(outbox.bytes(), len);
    assert_eq!(metrics.answers_waiting.get(), 1);
    assert_eq!(metrics.answer_bytes_waiting.get(), len as i64);
    let mut cx = Context::from_waker(Waker::noop());
    let first = Pin::new(&mut body).poll_frame(&mut cx);
    assert!(matches!(first, Poll::Ready(Some(Ok(_)))));
    // Part taken: still counted whole, in the budget too.
    assert_eq!(outbox.bytes(), len);
    assert_eq!(budget.available(), (1 << 20) - len);
    chunks(&mut body);
    // Every byte taken, yet hyper may still hold the last chunk it took:
    // counted until it drops the body.
    assert_eq!(outbox.bytes(), len);
    drop(body);
    assert_eq!(outbox.bytes(), 0);
    assert_eq!(metrics.answers_waiting.get(), 0);
    assert_eq!(metrics.answer_bytes_waiting.get(), 0);
    assert_eq!(budget.available(), 1 << 20);
}

#[test]
fn an_answer_dropped_unsent_gives_everything_back() {
    let metrics = Arc::new(Metrics::new());
    let outbox = Arc::new(Outbox::new(metrics.clone()));
    let before = outbox.progress();
    let mut body = ReplyBody::new(answer(100));
    body.queue_in(&outbox);
    assert_eq!(outbox.progress(), before + 1);
    let mut second = ReplyBody::new(answer(50));
    // Queued behind a waiting answer: the wait did not start again.
    second.queue_in(&outbox);
    assert_eq!(outbox.progress(), before + 1);
    assert_eq!(outbox.bytes(), 150);
    drop(body);
    drop(second);
    assert_eq!(outbox.bytes(), 0);
    assert_eq!(metrics.answers_waiting.get(), 0);
}
