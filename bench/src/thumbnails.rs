//! `nubo-bench thumbnails [--images N]`: thumbnails of 12-megapixel JPEGs (4000 x 3000, made
//! here with the image crate, each different) on a `nubo-master` process (release build,
//! SQLite, local policy, 2 task workers polling every 50 ms). First the decoder alone in this
//! process (the yardstick), then through the API: half the images one at a time (request,
//! then ask every 20 ms until 200), then the other half requested at once, so the two workers
//! make 2 thumbnails concurrently while the master's peak RSS (`VmHWM`, reset before) is read.

use std::io::Cursor;
use std::time::{Duration, Instant};

use image::codecs::jpeg::JpegEncoder;
use image::{Rgb, RgbImage};
use serde_json::Value;

use crate::files::{Bench, start_signed_in_with};

const WIDTH: u32 = 4000;
const HEIGHT: u32 = 3000;
const SIDE: u32 = 256;

/// A 12-MP photo-like JPEG: smooth colour fields with grain, different for each `seed`.
fn photo(seed: u32) -> Vec<u8> {
    let mut state = 0x9E37_79B9u32.wrapping_mul(seed + 1);
    let image = RgbImage::from_fn(WIDTH, HEIGHT, |x, y| {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        let grain = (state % 24) as u8;
        let r = ((x + seed * 97) / 16 % 200) as u8;
        let g = ((y + seed * 31) / 12 % 200) as u8;
        let b = (((x + y) / 20 + seed) % 200) as u8;
        Rgb([r.saturating_add(grain), g.saturating_add(grain), b.saturating_add(grain)])
    });
    let mut jpeg = Cursor::new(Vec::new());
    JpegEncoder::new_with_quality(&mut jpeg, 90).encode_image(&image).expect("encode");
    jpeg.into_inner()
}

async fn upload(bench: &Bench, name: &str, bytes: Vec<u8>) -> String {
    let created: Value = bench
        .client
        .post(format!("{}/file/content", bench.server.base))
        .query(&[("parent_id", bench.root.as_str()), ("name", name)])
        .bearer_auth(&bench.token)
        .body(bytes)
        .send()
        .await
        .expect("upload")
        .json()
        .await
        .expect("upload answer");
    created["id"].as_str().unwrap_or_else(|| panic!("upload of {name}: {created}")).to_owned()
}

/// Asks for the thumbnail until it is there; answers its size in bytes.
async fn thumbnail(bench: &Bench, id: &str) -> usize {
    let url = format!("{}/object/{id}/thumbnail?size={SIDE}", bench.server.base);
    loop {
        let response = bench.client.get(&url).bearer_auth(&bench.token).send().await.expect("thumbnail");
        match response.status().as_u16() {
            200 => return response.bytes().await.expect("thumbnail body").len(),
            202 => tokio::time::sleep(Duration::from_millis(20)).await,
            status => panic!("thumbnail of {id}: {status} {}", response.text().await.unwrap_or_default()),
        }
    }
}

pub async fn run(args: &[String]) {
    let images = match args {
        [] => 8,
        [flag, n] if flag == "--images" => n.parse::<usize>().ok().filter(|&n| n >= 4).unwrap_or_else(|| {
            eprintln!("--images takes a number of at least 4");
            std::process::exit(2);
        }),
        _ => {
            eprintln!("usage: nubo-bench thumbnails [--images N]");
            std::process::exit(2);
        }
    };
    let started = Instant::now();
    let photos: Vec<Vec<u8>> = (0..images as u32).map(photo).collect();
    let average = photos.iter().map(Vec::len).sum::<usize>() as f64 / images as f64 / 1e6;
    println!(
        "made {images} JPEGs of {WIDTH}x{HEIGHT} ({average:.1} MB on average) in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    // The yardstick: the same code in this process, no server.
    let started = Instant::now();
    for jpeg in &photos[..2] {
        nubo_common::thumbnail::render(jpeg, SIDE).expect("a thumbnail");
    }
    let in_process = started.elapsed().as_secs_f64() / 2.0;

    let env = [("NUBO_TASK_WORKERS", "2"), ("NUBO_TASK_POLL_MILLIS", "50")];
    let (bench, _) = start_signed_in_with(&env).await;
    let mut ids = Vec::new();
    for (index, jpeg) in photos.into_iter().enumerate() {
        ids.push(upload(&bench, &format!("photo-{index:03}.jpg"), jpeg).await);
    }
    let pid = bench.server.pid();
    let idle_rss = rss_mib(pid);

    let (serial, concurrent) = ids.split_at(images / 2);
    let mut latencies = Vec::new();
    for id in serial {
        let started = Instant::now();
        thumbnail(&bench, id).await;
        latencies.push(started.elapsed().as_secs_f64());
    }
    latencies.sort_by(f64::total_cmp);
    let median = latencies[latencies.len() / 2];

    bench.server.reset_peak();
    let baseline = rss_mib(pid);
    let started = Instant::now();
    let sizes = futures_util::future::join_all(concurrent.iter().map(|id| thumbnail(&bench, id))).await;
    let seconds = started.elapsed().as_secs_f64();
    let peak = bench.server.peak_rss_mib();
    let thumb_kib = sizes.iter().sum::<usize>() as f64 / sizes.len() as f64 / 1024.0;

    println!("\n| workload | figure | master RSS |");
    println!("|---|---:|---:|");
    println!(
        "| decode + scale + encode in-process (yardstick) | {:.2} thumbnails/s ({:.0} ms each) | - |",
        1.0 / in_process,
        in_process * 1000.0
    );
    println!(
        "| one at a time through the API (request → 200) | {:.2} thumbnails/s (median {:.0} ms) | {idle_rss:.1} MiB idle |",
        1.0 / median,
        median * 1000.0
    );
    println!(
        "| {} at once, 2 task workers | {:.2} thumbnails/s | peak {peak:.1} MiB (VmHWM; {baseline:.1} MiB before) |",
        concurrent.len(),
        concurrent.len() as f64 / seconds
    );
    println!("\nthumbnails: {SIDE} px JPEG, {thumb_kib:.1} KiB on average");
}

/// The master's resident memory now, in MiB.
fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(f64::NAN, |kib| kib / 1024.0)
}
