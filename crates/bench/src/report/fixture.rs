//! A realistic run for the tests: all nine groups and the four runtimes
//! groups, every system, the sweeps, cold and warm phases, sluice's
//! balancing policies as systems, idle memory, notes, a row with errors
//! and a row without process figures.

use crate::results::{
    Errors, Figures, Group, IdleMemory, Latency, LoadShape, Machine, PeerVersion, ProcessUsage,
    Results, Row, RuntimeInfo, Settings, SweepPoint, SCHEMA,
};

fn load(path: &str, connections: usize) -> LoadShape {
    LoadShape {
        request: format!("GET http://127.0.0.1:38080{path}"),
        protocol: "HTTP/1.1".into(),
        connections,
        pipeline: 1,
        rate: None,
        think_ms: None,
        duration_s: 10.0,
        warmup_s: 2.0,
    }
}

fn process_name(system: &str) -> String {
    match system {
        "sluice" => "sluice proxy".into(),
        "backend" => "sluice serve petstore".into(),
        other => other.to_owned(),
    }
}

/// A row whose percentiles spread from its mean like a real run's.
fn row(label: &str, system: &str, rps: f64, avg_ms: f64, rss_mib: u64, cpu_us: f64) -> Row {
    let avg_us = avg_ms * 1000.0;
    let us = |factor: f64| (avg_us * factor).round() as u64;
    // Three rounds spread around the figures asked for, as a real run's.
    let round = |factor: f64| {
        let rps = rps * factor;
        let requests = (rps * 10.0).round() as u64;
        Figures {
            requests,
            requests_per_sec: rps,
            bytes_per_sec: rps * 231.0,
            latency: Latency {
                avg_us: avg_us / factor,
                p50_us: us(0.9 / factor),
                p90_us: us(1.5 / factor),
                p95_us: us(1.8 / factor),
                p99_us: us(3.0 / factor),
                p999_us: us(6.5 / factor),
                max_us: us(14.0 / factor),
            },
            errors: Errors::default(),
            process: Some(ProcessUsage {
                name: process_name(system),
                peak_rss_kib: rss_mib * 1024 + 312,
                cpu_s: requests as f64 * cpu_us / 1e6,
                cpu_us_per_request: cpu_us,
            }),
        }
    };
    let rounds = vec![round(0.97), round(1.0), round(1.02)];
    Row {
        label: label.into(),
        system: system.into(),
        sweep: None,
        phase: None,
        runtime: None,
        warmup_rounds: 0,
        load: load("/v1/pets", 128),
        figures: rounds[1].clone(),
        rounds,
        idle: None,
    }
}

fn swept(mut r: Row, name: &str, value: f64) -> Row {
    r.sweep = Some(SweepPoint {
        name: name.into(),
        value,
    });
    r
}

fn group(name: &str, title: &str, question: &str, rows: Vec<Row>, notes: &[&str]) -> Group {
    Group {
        name: name.into(),
        title: title.into(),
        question: question.into(),
        rows,
        notes: notes.iter().map(|n| (*n).to_owned()).collect(),
    }
}

#[cfg(test)]
pub(crate) fn fixture() -> Results {
    let baseline = vec![
        row("backend petstore", "backend", 412_345.0, 0.31, 9, 2.4),
        {
            let mut r = row("backend petstore TLS", "backend", 301_220.0, 0.42, 11, 3.3);
            r.load.request = "GET https://localhost:38443/v1/pets".into();
            r
        },
        row("nginx petstore body", "nginx", 398_001.0, 0.33, 6, 2.5),
    ];

    let mut haproxy = row("haproxy -> petstore", "haproxy", 171_900.0, 0.74, 21, 5.7);
    haproxy.figures.errors = Errors {
        read: 10,
        non_2xx_3xx: 2,
        ..Errors::default()
    };
    let proxy = vec![
        row("sluice -> petstore", "sluice", 190_512.0, 0.67, 14, 5.1),
        row("nginx -> petstore", "nginx", 150_230.0, 0.85, 8, 6.4),
        haproxy,
        row("envoy -> petstore", "envoy", 61_000.0, 2.1, 30, 16.0),
        row("traefik -> petstore", "traefik", 40_500.0, 3.2, 48, 24.5),
    ];

    let middleware = [
        ("no handlers", 190_512.0, 0.67, 5.1),
        ("request id", 188_000.0, 0.68, 5.2),
        ("jwt (cached key)", 176_430.0, 0.72, 5.6),
        ("validation (petstore.yaml)", 170_002.0, 0.75, 5.9),
        ("rate limit", 186_100.0, 0.69, 5.2),
        ("full default chain", 158_700.0, 0.81, 6.3),
    ]
    .iter()
    .map(|(label, rps, avg, cpu)| row(label, "sluice", *rps, *avg, 15, *cpu))
    .collect();

    let protocols = vec![
        row("h1 -> h1", "sluice", 190_512.0, 0.67, 14, 5.1),
        row("h1 -> h2c", "sluice", 160_300.0, 0.80, 17, 6.1),
        row("h1 -> h2 TLS", "sluice", 140_800.0, 0.91, 19, 7.0),
        {
            let mut r = row("sluice TLS listener", "sluice", 150_000.0, 0.85, 18, 6.6);
            r.load.protocol = "HTTP/2".into();
            r.load.request = "GET https://localhost:38443/v1/pets".into();
            r
        },
        {
            let mut r = row("haproxy TLS listener", "haproxy", 120_000.0, 1.06, 25, 8.3);
            r.load.protocol = "HTTP/2".into();
            r.load.request = "GET https://localhost:38444/v1/pets".into();
            // The peer's figures could not be read.
            r.figures.process = None;
            r
        },
    ];

    let mut lb = Vec::new();
    for (c, scale) in [
        (500.0, 1.0),
        (2_000.0, 0.97),
        (6_000.0, 0.9),
        (12_000.0, 0.8),
    ] {
        for (system, rps, rss) in [
            ("sluice", 150_000.0, 20),
            ("nginx", 130_000.0, 12),
            ("haproxy", 140_000.0, 30),
        ] {
            let rps = rps * scale;
            let avg_ms = c / rps * 1000.0;
            let mut r = row(
                &format!("{system} c={c}"),
                system,
                rps,
                avg_ms,
                rss + (c / 1000.0) as u64,
                6.0,
            );
            r.load = load("/1k", c as usize);
            r.figures.bytes_per_sec = rps * 1_160.0;
            lb.push(swept(r, "connections", c));
        }
    }

    let mut io = Vec::new();
    for users in [300.0, 1_000.0, 5_000.0] {
        for (system, extra) in [("sluice", 0.4), ("haproxy", 1.1)] {
            let p95_target = 300.0 + extra * users / 100.0;
            let rps = users / 0.6;
            let mut r = row(
                &format!("{system} users={users}"),
                system,
                rps,
                p95_target / 1.8,
                30,
                25.0,
            );
            r.load = load("/messages", users as usize);
            r.load.think_ms = Some([100, 500]);
            r.load.duration_s = 30.0;
            io.push(swept(r, "users", users));
        }
    }

    let mut open = Vec::new();
    for rate in [1_000.0, 4_000.0] {
        for phase in ["cold", "warm"] {
            for (system, base) in [("sluice", 0.4), ("haproxy", 0.55)] {
                let slow = if phase == "cold" { 3.0 } else { 1.0 };
                let mut r = row(
                    &format!("{system} {rate}/s {phase}"),
                    system,
                    rate * 0.999,
                    base * slow * (1.0 + rate / 8_000.0),
                    16,
                    7.0,
                );
                r.load = load("/customers", 50);
                r.load.rate = Some(rate);
                r.load.duration_s = 30.0;
                r.load.warmup_s = if phase == "cold" { 0.0 } else { 5.0 };
                r.phase = Some(phase.into());
                open.push(swept(r, "rate", rate));
            }
        }
    }

    // One slow host among five: each policy is its own system, as
    // balancing.rs names them.
    let lb_slow = [
        ("sluice round_robin", 1_900.0, 16.0),
        ("sluice least_request", 3_700.0, 8.6),
        ("sluice least_time", 3_600.0, 8.9),
        ("haproxy least_conn", 3_500.0, 9.1),
        ("nginx least_conn", 3_300.0, 9.7),
    ]
    .iter()
    .map(|&(system, rps, avg_ms)| {
        let mut r = row(system, system, rps, avg_ms, 12, 9.0);
        r.load = load("/static", 32);
        r
    })
    .collect();

    let mut idle = Vec::new();
    for protocol in ["HTTP/1.1", "HTTP/2"] {
        for connections in [1_000, 10_000] {
            for (system, bytes) in [("sluice", 2_900.0), ("haproxy", 1_400.0), ("nginx", 950.0)] {
                let bytes = if protocol == "HTTP/2" {
                    bytes * 4.0
                } else {
                    bytes
                };
                let before = 9_000;
                let after = before + (bytes * connections as f64 / 1024.0) as u64;
                let mut r = row(
                    &format!("{system} {protocol} @ {connections}"),
                    system,
                    0.0,
                    0.0,
                    0,
                    0.0,
                );
                r.load = load("/", connections);
                r.load.protocol = protocol.into();
                r.load.request = "GET http://127.0.0.1:38080/, then idle".into();
                r.figures = Figures::memory_only(process_name(system), after);
                r.rounds = vec![r.figures.clone()];
                r.idle = Some(IdleMemory {
                    rss_before_kib: before,
                    rss_idle_kib: after,
                    bytes_per_connection: bytes,
                });
                idle.push(r);
            }
        }
    }

    Results {
        schema: SCHEMA.into(),
        started: "2026-11-22T09:30:00Z".into(),
        elapsed_s: 1_234.5,
        machine: Machine {
            cpu_model: "AMD Ryzen 7 2700 Eight-Core Processor".into(),
            cores: 16,
            kernel: "6.8.0-45-generic".into(),
            os: "Ubuntu 24.04.1 LTS".into(),
            memory_kib: 32_768_000,
            open_file_limit: 1_048_576,
            sluice_version: "0.1.0".into(),
            peers: vec![
                PeerVersion {
                    name: "nginx".into(),
                    version: "1.24.0".into(),
                    path: "/usr/sbin/nginx".into(),
                },
                PeerVersion {
                    name: "haproxy".into(),
                    version: "2.8.5".into(),
                    path: "/usr/sbin/haproxy".into(),
                },
                PeerVersion {
                    name: "envoy".into(),
                    version: "1.40.0".into(),
                    path: "/root/.cache/sluice/peers/bin/envoy".into(),
                },
                PeerVersion {
                    name: "traefik".into(),
                    version: "3.7.15".into(),
                    path: "/root/.cache/sluice/peers/bin/traefik".into(),
                },
            ],
        },
        settings: Settings {
            only: [
                "baseline",
                "proxy",
                "middleware",
                "protocols",
                "lb",
                "lb-slow",
                "io",
                "open",
                "idle",
                "runtimes",
                "peers",
            ]
            .iter()
            .map(|s| (*s).to_owned())
            .collect(),
            duration_s: 10.0,
            warmup_s: 2.0,
            connections: 128,
            pipeline: 1,
            pin: true,
            quick: false,
            max_conns: 12_000,
            rounds: 3,
            runtimes: ["sluice serve", "spring-mvc", "webflux", "go-http", "payara"]
                .iter()
                .map(|s| (*s).to_owned())
                .collect(),
        },
        notes: vec![
            "lb: sweep scaled down from 12,000 & up to 12,000 connections <open-file limit>".into(),
        ],
        groups: vec![
            group(
                "baseline",
                "Backend alone",
                "What is the baseline throughput and latency of the backend alone?",
                baseline,
                &[],
            ),
            group(
                "proxy",
                "The proxy in front of the backend",
                "What does adding the proxy in front of it cost?",
                proxy,
                &[],
            ),
            group(
                "middleware",
                "Middleware handlers",
                "What does each middleware handler cost, alone and as the full default chain?",
                middleware,
                &[],
            ),
            group(
                "protocols",
                "Protocols",
                "HTTP/1.1 vs HTTP/2 between proxy and backend; TLS on the listener.",
                protocols,
                &["nginx: no h2 to upstreams, row skipped"],
            ),
            group(
                "lb",
                "Load balancing over 5 backends",
                "How do the proxies balance 1 KB responses over 5 backends as connections grow?",
                lb,
                &["nginx: worker_connections raised to 16384"],
            ),
            group(
                "lb-slow",
                "One slow host among five",
                "When one of five backends answers 40ms later, which policy keeps p99 low at 32 connections?",
                lb_slow,
                &[],
            ),
            group(
                "io",
                "IO-heavy passthrough",
                "Users with think time in front of a 300 ms downstream: what is p95?",
                io,
                &[],
            ),
            group(
                "open",
                "Open model",
                "Latency under a fixed arrival rate, cold and warm.",
                open,
                &[],
            ),
            group(
                "idle",
                "Memory per idle connection",
                "What does an idle keep-alive client connection cost each proxy in RSS?",
                idle,
                &[],
            ),
        ]
        .into_iter()
        .chain(runtimes_groups())
        .collect(),
    }
}

/// What a backend runs on, as the runtimes groups record it.
fn on(mut r: Row, name: &str) -> Row {
    let (version, framework) = match name {
        "sluice serve" => (
            "sluice 0.1.0",
            "crates/backends (tokio, hand-written HTTP/1.1)",
        ),
        "go-http" => ("Go 1.26.8", "net/http (standard library)"),
        "payara" => ("OpenJDK 17.0.15", "Payara Micro 6.2025.10"),
        "nginx" => ("nginx 1.24.0", "a static response in its config"),
        _ => (
            "OpenJDK 17.0.15",
            "Spring Boot 3.5.16, Spring MVC 6.2.19, Tomcat 10.1.55",
        ),
    };
    r.warmup_rounds = usize::from(version.starts_with("OpenJDK") && r.phase.is_none());
    r.runtime = Some(RuntimeInfo {
        name: name.into(),
        version: version.into(),
        framework: framework.into(),
    });
    r
}

/// The four seeds' groups: sluice serve, a Go and two JVM backends, nginx
/// in front and serving bytes, a skipped runtime's note, timeouts.
fn runtimes_groups() -> Vec<Group> {
    let hello = [
        ("sluice serve", "backend", 512_004.0),
        ("spring-mvc", "backend", 18_250.0),
        ("webflux", "backend", 61_020.0),
        ("go-http", "backend", 160_200.0),
        ("nginx", "nginx", 301_000.0),
    ]
    .iter()
    .map(|&(name, system, rps)| {
        let label = if system == "nginx" {
            "nginx hello bytes".to_string()
        } else {
            format!("{name} hello")
        };
        let mut r = on(
            row(&label, system, rps, 250.0 / rps * 1000.0, 40, 3.0),
            name,
        );
        r.load = load("/", 128);
        r.load.pipeline = 16;
        r
    })
    .collect();
    let mut petstore = Vec::new();
    for (name, alone) in [
        ("sluice serve", 420_000.0),
        ("spring-mvc", 21_000.0),
        ("go-http", 150_000.0),
    ] {
        petstore.push(on(
            row(&format!("{name} petstore"), "backend", alone, 2.0, 30, 4.0),
            name,
        ));
        for (proxy, share) in [("sluice", 0.4), ("nginx", 0.35)] {
            let behind = alone.min(160_000.0) * share / 0.4;
            let label = format!("{proxy} -> {name} petstore");
            petstore.push(on(row(&label, proxy, behind, 3.0, 20, 6.0), name));
        }
    }
    let mut io = Vec::new();
    for users in [300.0, 5_000.0] {
        for (name, via, p95_ms) in [
            ("sluice serve", None, 301.0),
            (
                "spring-mvc",
                None,
                if users > 1_000.0 { 9_800.0 } else { 305.0 },
            ),
            (
                "spring-mvc",
                Some("sluice"),
                if users > 1_000.0 { 9_900.0 } else { 306.0 },
            ),
            ("webflux", None, 312.0),
        ] {
            let label = match via {
                Some(proxy) => format!("{proxy} -> {name} passthrough @ {users}"),
                None => format!("{name} passthrough @ {users}"),
            };
            let mut r = row(
                &label,
                via.unwrap_or("backend"),
                users / 1.8,
                p95_ms / 1.8,
                90,
                30.0,
            );
            r.load.think_ms = Some([1000, 2000]);
            if p95_ms > 1_000.0 {
                for round in &mut r.rounds {
                    round.errors.timeout = 400;
                }
                r.figures.errors.timeout = 1_200;
            }
            io.push(on(swept(r, "users", users), name));
        }
    }
    let mut open = Vec::new();
    for rate in [1_000.0, 2_000.0] {
        for (name, cold_ms) in [
            ("sluice serve", 0.4),
            ("spring-mvc", 48.0),
            ("payara", 95.0),
        ] {
            for (phase, ms) in [("cold", cold_ms), ("warm", 1.2)] {
                let label = format!("{name} customers @ {rate} req/s, {phase}");
                let mut r = row(&label, "backend", rate, ms, 300, 20.0);
                r.load = load("/customers", 128);
                r.load.rate = Some(rate);
                r.load.warmup_s = 0.0;
                r.phase = Some(phase.into());
                open.push(on(swept(r, "rate", rate), name));
            }
        }
    }
    vec![
        group(
            "runtimes-hello",
            "Hello world in each runtime (seeds/001)",
            "How many?",
            hello,
            &["node skipped: node is not on PATH (apt-get install -y nodejs)"],
        ),
        group(
            "runtimes-petstore",
            "Each runtime's petstore, alone and behind a proxy (seeds/000 Q5)",
            "Behind ÷ alone?",
            petstore,
            &[],
        ),
        group(
            "runtimes-io",
            "Blocking vs non-blocking passthrough (seeds/003)",
            "p95?",
            io,
            &[],
        ),
        group(
            "runtimes-open",
            "Customers at an open arrival rate, cold and warm (seeds/004)",
            "Cold and warm?",
            open,
            &[],
        ),
    ]
}
