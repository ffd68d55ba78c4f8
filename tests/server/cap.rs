//! The connection cap on real sockets: at `--max-connections`, a new
//! connection is served at once, in the slot of the least productive
//! connection (the one whose last review is the oldest, or that never
//! completed one), whether or not it has a request in flight.

use crate::support::*;
use http_body_util::channel::{Channel, Sender};
use http_body_util::BodyExt;
use hyper::body::Bytes;
use hyper::StatusCode;
use kserve_injector::server::RunningServer;
use std::time::Duration;
use tokio::task::JoinHandle;

/// A small cap, and deadlines far past the test, so that only eviction
/// can free a slot.
const FLAGS: [&str; 14] = [
    "--shutdown-delay",
    "0s",
    "--max-connections",
    "4",
    "--idle-timeout",
    "600s",
    "--header-read-timeout",
    "600s",
    "--first-request-timeout",
    "600s",
    "--request-timeout",
    "600s",
    "--body-timeout",
    "600s",
];

/// A review whose body is half sent: in flight until [`Held::finish`].
struct Held {
    rest: Bytes,
    sender: Sender<Bytes>,
    answer: JoinHandle<Result<(StatusCode, Bytes), Error>>,
}

impl Held {
    async fn start(mut client: Client, review: Vec<u8>) -> Result<Self, Error> {
        let (mut sender, body) = Channel::<Bytes>::new(1);
        let review = Bytes::from(review);
        let half = review.len() / 2;
        sender.send_data(review.slice(..half)).await?;
        let request = post("/mutate-pods", Some("application/json"), body.boxed())?;
        let answer = tokio::spawn(async move { client.call(request).await });
        Ok(Self {
            rest: review.slice(half..),
            sender,
            answer,
        })
    }

    async fn finish(mut self) -> Result<StatusCode, Error> {
        self.sender.send_data(self.rest).await?;
        drop(self.sender);
        let (status, _) = tokio::time::timeout(PATIENCE, self.answer).await???;
        Ok(status)
    }
}

async fn in_flight(server: &RunningServer) -> Result<f64, Error> {
    metric_now(server.admin_addr(), "kserve_injector_requests_in_flight").await
}

/// Until the server has closed `client`'s connection.
async fn closed(client: &mut Client) -> TestResult {
    let wait = async {
        while client.ready().await {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    Ok(tokio::time::timeout(PATIENCE, wait).await?)
}

async fn answered(client: &mut Client, review: &[u8]) -> Result<StatusCode, Error> {
    let (status, _) = client.post_json("/mutate-pods", review.to_vec()).await?;
    Ok(status)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_cap_a_new_connection_takes_the_slot_of_the_longest_idle_one() -> TestResult {
    let (_, review) = sample_review()?;
    for http in Http::BOTH {
        let tmp = tempfile::tempdir()?;
        let (server, ca) = start_self_signed(tmp.path(), &FLAGS).await?;
        let addr = server.local_addr();
        // Answered one after another: the first is idle the longest.
        let mut idle = Vec::new();
        for _ in 0..4 {
            let mut client = Client::open(addr, &ca, http).await?;
            ensure(
                answered(&mut client, &review).await? == StatusCode::OK,
                || format!("{http:?}: a client below the cap"),
            )?;
            idle.push(client);
        }
        // The second now has a request in flight, so it is not idle.
        let busy = Held::start(idle.remove(1), review.clone()).await?;
        eventually(PATIENCE, "the request in flight", || async {
            in_flight(&server).await.ok().filter(|n| *n == 1.0)
        })
        .await?;
        // Without eviction this would wait for the 600 s idle timeout.
        let mut new = Client::open(addr, &ca, http).await?;
        ensure(answered(&mut new, &review).await? == StatusCode::OK, || {
            format!("{http:?}: the new client at the cap")
        })?;
        closed(&mut idle[0]).await?;
        for (i, client) in idle.iter_mut().enumerate().skip(1) {
            ensure(answered(client, &review).await? == StatusCode::OK, || {
                format!("{http:?}: idle client {i} was not the longest idle, yet closed")
            })?;
        }
        ensure(busy.finish().await? == StatusCode::OK, || {
            format!("{http:?}: the request in flight was cut")
        })?;
        let admin = server.admin_addr();
        let evicted = metric_now(admin, "kserve_injector_connection_evictions_total").await?;
        ensure(evicted == 1.0, || format!("{http:?}: evictions {evicted}"))?;
        stop(server).await?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_every_connection_busy_a_new_one_is_served_at_once_for_the_least_productive(
) -> TestResult {
    let tmp = tempfile::tempdir()?;
    let (server, ca) = start_self_signed(tmp.path(), &FLAGS).await?;
    let (addr, admin) = (server.local_addr(), server.admin_addr());
    let (_, review) = sample_review()?;
    // Four connections, none of which has completed a review, each with a
    // request in flight whose body is half sent: the first accepted is the
    // least productive.
    let mut busy = Vec::new();
    for i in 0..4 {
        let client = Client::open(addr, &ca, Http::BOTH[i % 2]).await?;
        busy.push(Held::start(client, review.clone()).await?);
    }
    eventually(PATIENCE, "four requests in flight", || async {
        in_flight(&server).await.ok().filter(|n| *n == 4.0)
    })
    .await?;
    // Requests in flight are promises, not progress: the fifth connection
    // does not wait for one to finish.
    let mut fifth = tokio::time::timeout(Duration::from_secs(3), Client::open(addr, &ca, Http::H2))
        .await
        .map_err(|_| {
            fail("a fifth connection waited for a slot while four requests were in flight")
        })??;
    ensure(
        answered(&mut fifth, &review).await? == StatusCode::OK,
        || "the fifth client".into(),
    )?;
    // The first one's request is answered 503 (retry) or its connection
    // closed; the others finish.
    let first = busy.remove(0);
    if let Ok(status) = first.finish().await {
        ensure(status == StatusCode::SERVICE_UNAVAILABLE, || {
            format!("the evicted connection's request: {status}")
        })?;
    }
    for (i, held) in busy.into_iter().enumerate() {
        ensure(held.finish().await? == StatusCode::OK, || {
            format!("request {} of a connection not evicted was cut", i + 1)
        })?;
    }
    let evicted = metric_now(admin, "kserve_injector_connection_evictions_total").await?;
    ensure(evicted == 1.0, || format!("evictions {evicted}"))?;
    stop(server).await
}
