//! `nubo-bench login [--seconds N] [--concurrency C] [--users U]`: sign-ins per second
//! (`POST /user/session`, provider `email_password`) on an in-process master on SQLite, first
//! with the password alone, then with a TOTP code as well; and the cost of the TOTP check
//! itself, timed in this process. argon2 dominates a sign-in; the figures show by how much.
//!
//! A TOTP code counts once per account and 30-second step, so the second run needs fresh
//! codes: U accounts with two-factor sign-in on each give two (the current step's and the
//! next one's), and the run ends when they are used up or after N seconds.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nubo_tests::{Backend, TestApp};
use reqwest::Method;
use serde_json::{Value, json};
use totp_rs::Totp;

const PASSWORD: &str = "bench-password-1234";
const STEP: u64 = 30;

struct Options {
    seconds: u64,
    concurrency: usize,
    users: usize,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut options = Options { seconds: 10, concurrency: 8, users: 300 };
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let mut value = || iter.next().cloned().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--seconds" => options.seconds = value()?.parse().map_err(|e| format!("--seconds: {e}"))?,
            "--concurrency" => options.concurrency = value()?.parse().map_err(|e| format!("--concurrency: {e}"))?,
            "--users" => options.users = value()?.parse().map_err(|e| format!("--users: {e}"))?,
            other => return Err(format!("unknown option {other}")),
        }
    }
    Ok(options)
}

fn step_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_secs() / STEP
}

fn login_body(email: &str, code: Option<String>) -> Value {
    json!({"provider": "email_password", "identifier": email, "credential": PASSWORD, "two_fa_code": code})
}

/// Registers `email` and turns two-factor sign-in on with the previous step's code.
async fn enrol(app: &TestApp, email: &str) -> Totp {
    let session = app.register(email, PASSWORD).await;
    let setup: Value =
        app.call(Method::GET, "/user/settings/2fa", Some(&session.access), None).await.json().await.expect("setup");
    let totp = Totp::from_url(setup["uri"].as_str().expect("uri")).expect("otpauth URI");
    let code = totp.generate((step_now() - 1) * STEP).to_string();
    let response =
        app.call(Method::POST, "/user/settings/2fa", Some(&session.access), Some(json!({"code": code}))).await;
    assert_eq!(response.status(), 200, "enable two-factor sign-in");
    totp
}

/// What one run measured.
struct Run {
    label: &'static str,
    signed_in: usize,
    errors: usize,
    seconds: f64,
}

/// Sends the bodies `next` hands out from `concurrency` workers until it runs dry or `duration`
/// passes.
async fn drive(
    label: &'static str,
    url: &str,
    next: Arc<dyn Fn() -> Option<Value> + Send + Sync>,
    concurrency: usize,
    duration: Duration,
) -> Run {
    let started = Instant::now();
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            let client = reqwest::Client::builder().pool_max_idle_per_host(1).build().expect("client");
            let url = url.to_owned();
            let next = next.clone();
            tokio::spawn(async move {
                let (mut ok, mut errors) = (0, 0);
                while started.elapsed() < duration {
                    let Some(body) = next() else { break };
                    match client.post(&url).json(&body).send().await {
                        Ok(response) if response.status().is_success() => {
                            let _ = response.bytes().await;
                            ok += 1;
                        }
                        _ => errors += 1,
                    }
                }
                (ok, errors)
            })
        })
        .collect();
    let (mut signed_in, mut errors) = (0, 0);
    for worker in workers {
        let (ok, failed) = worker.await.expect("worker");
        signed_in += ok;
        errors += failed;
    }
    Run { label, signed_in, errors, seconds: started.elapsed().as_secs_f64() }
}

/// Checks per second of one code against a secret (`totp-rs`, HMAC-SHA-1 over three steps).
fn totp_checks_per_second(totp: &Totp) -> f64 {
    let now = step_now() * STEP;
    let wrong = "000000";
    let rounds = 20_000;
    let started = Instant::now();
    let mut matched = 0;
    for _ in 0..rounds {
        // A wrong code costs the most: every step of the window is tried.
        matched += usize::from(std::hint::black_box(totp.check(std::hint::black_box(wrong), now)).is_some());
    }
    std::hint::black_box(matched);
    f64::from(rounds) / started.elapsed().as_secs_f64()
}

pub async fn run(args: &[String]) {
    let options = match parse(args) {
        Ok(options) => options,
        Err(err) => {
            eprintln!("{err}\nusage: nubo-bench login [--seconds N] [--concurrency C] [--users U]");
            std::process::exit(2);
        }
    };
    // The server gets its own runtime of two workers, as in `nubo-bench auth`.
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let users = options.users;
    let server = std::thread::spawn(move || {
        let runtime =
            tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
        runtime.block_on(async move {
            // The per-address budget would stop a benchmark from one address after 100 sign-ins.
            let app = TestApp::spawn_configured(Backend::Sqlite, |c| c.login_attempts_per_address = u64::MAX)
                .await
                .expect("SQLite needs no service");
            app.register("plain@bench.test", PASSWORD).await;
            let mut enrolled = Vec::with_capacity(users);
            for i in 0..users {
                let email = format!("totp{i}@bench.test");
                enrolled.push((email.clone(), enrol(&app, &email).await));
            }
            ready_tx.send((app.api("/user/session"), enrolled)).expect("bench waits");
            let _ = stop_rx.await;
            drop(app);
        });
    });
    eprintln!("enrolling {users} accounts with two-factor sign-in...");
    let (url, enrolled) = ready_rx.recv().expect("server starts");
    let duration = Duration::from_secs(options.seconds);

    let password_only =
        drive("password", &url, Arc::new(|| Some(login_body("plain@bench.test", None))), options.concurrency, duration)
            .await;

    // Two fresh codes per account: this step's and the next (both accepted for 30 s at least).
    let step = step_now();
    let mut bodies: Vec<Value> = Vec::with_capacity(2 * enrolled.len());
    for offset in [1, 0] {
        for (email, totp) in &enrolled {
            bodies.push(login_body(email, Some(totp.generate((step + offset) * STEP).to_string())));
        }
    }
    let bodies = Arc::new(Mutex::new(bodies));
    let with_totp = drive(
        "password + TOTP code",
        &url,
        Arc::new(move || bodies.lock().expect("bodies").pop()),
        options.concurrency,
        duration,
    )
    .await;

    println!("\n| sign-in (`POST /user/session`, SQLite) | sign-ins/s | signed in | errors | seconds | concurrency |");
    println!("|---|---:|---:|---:|---:|---:|");
    for run in [&password_only, &with_totp] {
        println!(
            "| {} | {:.1} | {} | {} | {:.1} | {} |",
            run.label,
            run.signed_in as f64 / run.seconds,
            run.signed_in,
            run.errors,
            run.seconds,
            options.concurrency
        );
    }
    let checks = totp_checks_per_second(&enrolled[0].1);
    println!("\nTOTP check alone (wrong code, 3 steps tried): {checks:.0}/s, {:.1} µs each", 1e6 / checks);
    let _ = stop_tx.send(());
    let _ = server.join();
}
