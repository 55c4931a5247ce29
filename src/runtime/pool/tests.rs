use std::sync::mpsc;
use std::time::Duration;

use super::*;

fn pool(concurrency: usize, queue: usize) -> RunPool {
    pool_waiting(concurrency, queue, Duration::from_secs(60))
}

fn pool_waiting(concurrency: usize, queue: usize, wait: Duration) -> RunPool {
    RunPool::new(RunSlots {
        concurrency,
        queue,
        wait,
    })
}

fn tenant(name: &str) -> Tenant {
    Tenant::anonymous(name)
}

/// Starts a job that holds its slot until `release` is sent to.
async fn hold(
    pool: &RunPool,
) -> (
    mpsc::Sender<()>,
    tokio::task::JoinHandle<Result<(), PoolError>>,
) {
    let (release, wait) = mpsc::channel::<()>();
    let (started_tx, started) = tokio::sync::oneshot::channel();
    let p = pool.clone();
    let handle = tokio::spawn(async move {
        p.run(&tenant("holder"), move || {
            let _ = started_tx.send(());
            let _ = wait.recv_timeout(Duration::from_secs(60));
        })
        .await
    });
    started.await.expect("the job started");
    (release, handle)
}

/// Waits (without a timed assertion) until `n` jobs wait.
async fn until_waiting(p: &RunPool, n: usize) {
    while p.waiting() != n {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

#[tokio::test]
async fn past_the_queue_a_job_is_refused_naming_the_env_vars() {
    let p = pool(1, 0);
    let (release, first) = hold(&p).await;
    let err = p.run(&tenant("a"), || ()).await.unwrap_err();
    assert_eq!(
        err,
        PoolError::Busy {
            concurrency: 1,
            queue: 0
        }
    );
    assert!(err.not_started());
    let text = err.to_string();
    assert!(
        text.contains("CODEMODE_RUN_CONCURRENCY") && text.contains("CODEMODE_RUN_QUEUE"),
        "{text}"
    );
    release.send(()).unwrap();
    first.await.unwrap().unwrap();
    assert_eq!(p.run(&tenant("a"), || 7).await, Ok(7), "the slot came back");
}

#[tokio::test]
async fn queued_jobs_wait_for_a_slot_and_then_run() {
    let p = pool(1, 2);
    let (release, first) = hold(&p).await;
    let q = p.clone();
    let queued = tokio::spawn(async move { q.run(&tenant("a"), || "ran").await });
    until_waiting(&p, 1).await;
    assert!(
        matches!(
            p.run(&tenant("a"), || "second of a").await,
            Err(PoolError::Busy { queue: 1, .. })
        ),
        "one tenant holds at most half the waiting places"
    );
    assert_eq!(p.running(), 1);
    release.send(()).unwrap();
    first.await.unwrap().unwrap();
    assert_eq!(queued.await.unwrap(), Ok("ran"));
    assert_eq!((p.running(), p.waiting()), (0, 0));
}

#[tokio::test]
async fn a_job_that_waits_out_its_time_is_refused_and_leaves_the_queue() {
    let p = pool_waiting(1, 8, Duration::from_millis(50));
    let (release, first) = hold(&p).await;
    let err = p.run(&tenant("a"), || ()).await.unwrap_err();
    assert!(
        matches!(err, PoolError::WaitedOut { concurrency: 1, .. }),
        "{err:?}"
    );
    assert!(err.not_started());
    let text = err.to_string();
    assert!(
        text.contains("CODEMODE_RUN_QUEUE_TIMEOUT_MS") && text.contains("run it again"),
        "{text}"
    );
    assert_eq!(p.waiting(), 0);
    release.send(()).unwrap();
    first.await.unwrap().unwrap();
    assert_eq!(p.run(&tenant("a"), || 1).await, Ok(1), "no slot was lost");
}

#[tokio::test]
async fn a_caller_that_goes_away_while_waiting_leaves_its_place_and_no_slot_is_lost() {
    let p = pool(1, 8);
    let (release, first) = hold(&p).await;
    let q = p.clone();
    let gone = tokio::spawn(async move { q.run(&tenant("a"), || ()).await });
    until_waiting(&p, 1).await;
    gone.abort();
    let _ = gone.await;
    assert_eq!(p.waiting(), 0);
    release.send(()).unwrap();
    first.await.unwrap().unwrap();
    assert_eq!(p.run(&tenant("b"), || 2).await, Ok(2));
    assert_eq!(p.running(), 0);
}

#[tokio::test]
async fn a_caller_that_goes_away_keeps_the_slot_until_the_job_ends() {
    let p = pool(1, 0);
    let (release, first) = hold(&p).await;
    first.abort();
    let _ = first.await;
    assert!(
        matches!(
            p.run(&tenant("a"), || ()).await,
            Err(PoolError::Busy { .. })
        ),
        "the job still runs, so its slot is still taken"
    );
    release.send(()).unwrap();
    while p.running() != 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(p.run(&tenant("a"), || 1).await, Ok(1));
}

#[tokio::test]
async fn waiting_tenants_are_served_in_turn_however_many_one_queued() {
    let p = pool(1, 64);
    let (release, first) = hold(&p).await;
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut jobs = Vec::new();
    let mut enqueue = |who: &'static str, n: usize| {
        let (q, order) = (p.clone(), order.clone());
        jobs.push(tokio::spawn(async move {
            q.run(&tenant(who), move || {
                order.lock().unwrap().push(format!("{who}{n}"))
            })
            .await
        }));
    };
    for n in 0..6 {
        enqueue("noisy", n);
    }
    until_waiting(&p, 6).await;
    enqueue("quiet", 0);
    until_waiting(&p, 7).await;
    enqueue("other", 0);
    until_waiting(&p, 8).await;
    release.send(()).unwrap();
    first.await.unwrap().unwrap();
    for j in jobs {
        j.await.unwrap().unwrap();
    }
    let order = order.lock().unwrap().clone();
    assert_eq!(
        order,
        ["noisy0", "quiet0", "other0", "noisy1", "noisy2", "noisy3", "noisy4", "noisy5"],
        "each tenant in turn, each tenant's own in order"
    );
}
