use super::*;
use crate::report::fixture;

fn seed<'a>(results: &'a crate::results::Results, name: &str) -> &'a Group {
    results
        .groups
        .iter()
        .find(|g| g.name == name)
        .expect("a runtimes group in the fixture")
}

#[test]
fn hello_reads_each_runtime_against_sluice_serve_and_the_seed() {
    let results = fixture();
    let (table, caption) = table(seed(&results, "runtimes-hello")).expect("a table");
    let md = table.markdown();
    // 512,004 / 18,250 here; 1,457,258 / 33,086 in seeds/001.
    assert!(
        md.contains("| spring-mvc | 18,250 |")
            && md.contains("| 28.06x | Spring Tomcat: 33,086 | 44.04x |"),
        "{md}"
    );
    assert!(md.contains("| sluice serve | 512,004 |"), "{md}");
    assert!(
        md.contains("| 1.00x | light-java: 1,457,258 | 1.00x |"),
        "{md}"
    );
    // A peer's bytes have no counterpart in the seed.
    assert!(
        md.contains("| nginx | 301,000 |") && md.contains("| - | - |"),
        "{md}"
    );
    assert!(caption.contains("compare those two ratios"), "{caption}");
    let line = line(seed(&results, "runtimes-hello")).expect("a line");
    assert!(
        line.starts_with("sluice serve 512,004 req/s; spring-mvc 0.04x"),
        "{line}"
    );
    assert!(
        line.contains("(seeds/001, of light-java: spring-mvc 0.02x"),
        "{line}"
    );
}

/// A backend that fails most of its requests (Envoy's direct response
/// closes a pipelining connection after its first answer) gets no ratio:
/// "6324x" would read as a speed.
#[test]
fn a_failing_hello_row_gets_no_ratio() {
    let mut results = fixture();
    let group = results
        .groups
        .iter_mut()
        .find(|g| g.name == "runtimes-hello")
        .unwrap();
    let nginx = group
        .rows
        .iter_mut()
        .find(|r| super::backend(r) == "nginx")
        .unwrap();
    nginx.figures.requests = 256;
    nginx.figures.requests_per_sec = 256.0;
    nginx.figures.errors.failed.read = 10_368;
    let group = seed(&results, "runtimes-hello");
    let md = table(group).expect("a table").0.markdown();
    assert!(
        md.contains("| nginx | 256 |") && md.contains("| 10,368 | - (failing) |"),
        "{md}"
    );
    let line = line(group).expect("a line");
    assert!(line.contains("nginx failing"), "{line}");
}

#[test]
fn petstore_gives_behind_over_alone_for_each_proxy() {
    let results = fixture();
    let group = seed(&results, "runtimes-petstore");
    let (table, _) = table(group).expect("a table");
    let md = table.markdown();
    assert!(
        md.contains("| Backend | alone req/s | behind sluice | behind nginx | seeds/000 |"),
        "{md}"
    );
    // spring-mvc: 21,000 alone, 21,000 behind sluice, 18,375 behind nginx.
    assert!(
        md.contains(
            "| spring-mvc | 21,000 | 21,000 (1.00x) | 18,375 (0.87x) | 0.46x (Spring Boot) |"
        ),
        "{md}"
    );
    assert!(md.contains("| 0.07x (light-4j) |"), "{md}");
    assert!(md.contains("| go-http | 150,000 |"), "{md}");
    let line = line(group).expect("a line");
    assert!(
        line.starts_with("behind ÷ alone, req/s: sluice serve sluice 0.38x, nginx 0.33x; spring-mvc sluice 1.00x"),
        "{line}"
    );
}

#[test]
fn io_shows_p95_failures_and_unanswered_per_user_count() {
    let results = fixture();
    let group = seed(&results, "runtimes-io");
    let (table, caption) = table(group).expect("a table");
    let md = table.markdown();
    assert!(
        md.contains("| users | backend | p95 | answered/s | failed | unanswered |"),
        "{md}"
    );
    // 1,200 timeouts over three rounds; the windows too short for the
    // latency are marked.
    for line in [
        "| 5,000 | sluice serve | 301ms | 2,778 | 0 | 102 |",
        "| 5,000 | spring-mvc * | 9.80s | 2,778 | 1,200 | 102 |",
        "| 5,000 | sluice -> spring-mvc * | 9.90s | 2,778 | 1,200 | 102 |",
        "| 300 | webflux | 312ms | 167 | 0 | 26 |",
    ] {
        assert!(md.contains(line), "{line} missing in:\n{md}");
    }
    assert!(caption.contains("thinking 1000-2000 ms"), "{caption}");
    assert!(caption.contains("not comparable"), "{caption}");
    let line = line(group).expect("a line");
    assert!(
        line.starts_with("at 5,000 users, p95: sluice serve"),
        "{line}"
    );
    assert!(
        line.contains("spring-mvc 9.80s, 2,778/s answered, 1,200 failed, 102 unanswered *; "),
        "{line}"
    );
    assert!(
        line.ends_with("webflux 312ms, 2,778/s answered, 0 failed, 102 unanswered"),
        "{line}"
    );
}

#[test]
fn open_compares_cold_with_warm() {
    let results = fixture();
    let group = seed(&results, "runtimes-open");
    let md = table(group).expect("a table").0.markdown();
    assert!(
        md.contains("| Backend | rate/s | cold mean | cold p95 |"),
        "{md}"
    );
    assert!(md.contains("| payara | 2,000 | 95.0ms |"), "{md}");
    assert!(md.contains("| 79.17x |"), "{md}");
    assert!(md.contains("| cold failed/unans. |"), "{md}");
    let line = line(group).expect("a line");
    assert_eq!(
        line,
        "at 2,000 req/s, mean cold -> warm: sluice serve 400µs -> 1.20ms; spring-mvc 48.0ms -> \
         1.20ms; payara 95.0ms -> 1.20ms"
    );
    // A cold JVM that answered nothing in its window: no latency of 0,
    // what it left unanswered, and the mark.
    let mut results = fixture();
    let group = results
        .groups
        .iter_mut()
        .find(|g| g.name == "runtimes-open")
        .expect("runtimes-open");
    let cold = group
        .rows
        .iter_mut()
        .find(|r| r.label == "payara customers @ 2000 req/s, cold")
        .expect("payara cold");
    cold.figures.requests = 0;
    cold.figures.unanswered = 128;
    cold.not_comparable = vec!["window shorter than its latency: test".into()];
    let md = table(group).expect("a table").0.markdown();
    assert!(md.contains("| payara * | 2,000 | - | - | 0/128 |"), "{md}");
}

#[test]
fn versions_say_what_each_backend_ran_on_and_its_warm_up() {
    let results = fixture();
    let md = versions(seed(&results, "runtimes-hello"))
        .expect("versions")
        .markdown();
    assert!(
        md.contains("| spring-mvc | OpenJDK 17.0.15 | Spring Boot 3.5.16, Spring MVC 6.2.19, Tomcat 10.1.55 | 1 |"),
        "{md}"
    );
    assert!(
        md.contains("| go-http | Go 1.26.8 | net/http (standard library) | 0 |"),
        "{md}"
    );
    // Cold and warm rows discard nothing.
    let open = versions(seed(&results, "runtimes-open"))
        .expect("versions")
        .markdown();
    assert!(
        open.contains("| payara | OpenJDK 17.0.15 | Payara Micro 6.2025.10 | 0 |"),
        "{open}"
    );
}

#[test]
fn seed_tables_fit_a_terminal() {
    let results = fixture();
    for group in results.groups.iter().filter(|g| is_seed(g)) {
        let (table, _) = table(group).expect("a table");
        for line in table.text().lines() {
            assert!(line.chars().count() <= 130, "{}: {line}", group.name);
        }
    }
}

#[test]
fn a_seed_without_rows_has_no_table() {
    let mut results = fixture();
    for g in &mut results.groups {
        g.rows.clear();
    }
    for g in results.groups.iter().filter(|g| is_seed(g)) {
        assert!(table(g).is_none() && chart(g).is_none() && line(g).is_none());
    }
}
