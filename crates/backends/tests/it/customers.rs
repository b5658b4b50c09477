//! `customers` over real sockets, including concurrent registrations.

use backends::Backend;
use testkit::{serve, serve_with, test_options, RawConn};

fn customer(id: u64) -> String {
    format!(r#"{{"id":{id},"name":"Customer {id}","email":"c{id}@example.com"}}"#)
}

#[tokio::test]
async fn lists_the_ten_seeded_customers() {
    let server = serve(Backend::Customers);
    let mut conn = RawConn::connect(server.addr()).await;
    let response = conn.get("/customers").await;
    assert_eq!(response.status, 200);
    assert_eq!(response.header("content-type"), Some("application/json"));
    let list = response.json();
    let ids: Vec<u64> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_u64().unwrap())
        .collect();
    assert_eq!(ids, [10, 9, 8, 7, 6, 5, 4, 3, 2, 1]);
    assert_eq!(list[0]["email"], "customer10@example.com");
}

#[tokio::test]
async fn registers_then_lists_newest_first() {
    let server = serve(Backend::Customers);
    let mut conn = RawConn::connect(server.addr()).await;
    let created = conn.post_json("/customers", &customer(42)).await;
    assert_eq!(created.status, 201);
    assert_eq!(created.header("location"), Some("/customers/42"));
    assert_eq!(created.json()["name"], "Customer 42");

    let list = conn.get("/customers").await.json();
    assert_eq!(list.as_array().unwrap().len(), 10);
    assert_eq!(list[0]["id"], 42);
    assert_eq!(list[9]["id"], 2);

    let one = conn.get("/customers/42").await;
    assert_eq!(one.status, 200);
    assert_eq!(one.json()["email"], "c42@example.com");
    assert_eq!(conn.get("/customers/4242").await.status, 404);
    assert_eq!(conn.get("/customers/abc").await.status, 400);
}

#[tokio::test]
async fn duplicate_id_is_a_conflict() {
    let server = serve(Backend::Customers);
    let mut conn = RawConn::connect(server.addr()).await;
    let seeded = conn.post_json("/customers", &customer(3)).await;
    assert_eq!(seeded.status, 409);
    assert_eq!(
        seeded.header("content-type"),
        Some("application/problem+json")
    );
    assert!(seeded.json()["detail"].as_str().unwrap().contains("id 3"));
}

#[tokio::test]
async fn invalid_bodies_name_the_field() {
    let server = serve(Backend::Customers);
    let mut conn = RawConn::connect(server.addr()).await;
    let invalid = conn
        .post_json("/customers", r#"{"id":11,"name":"x","email":"no-at-sign"}"#)
        .await;
    assert_eq!(invalid.status, 400);
    assert_eq!(invalid.json()["errors"][0]["pointer"], "/email");
    let not_object = conn.post_json("/customers", "[]").await;
    assert_eq!(not_object.status, 400);
    let text = conn
        .request("POST", "/customers", &["Content-Type: text/csv"], b"1,a")
        .await;
    assert_eq!(text.status, 415);
    let put = conn.request("PUT", "/customers", &[], b"").await;
    assert_eq!(put.status, 405);
    assert_eq!(put.header("allow"), Some("GET, HEAD, POST"));
    assert_eq!(conn.get("/customer").await.status, 404);
}

/// Many clients on two workers register at once; each id wins exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_registrations_are_consistent() {
    let server = serve_with(
        Backend::Customers,
        testkit::ServeOptions {
            workers: 2,
            ..test_options()
        },
    );
    let addr = server.addr();
    const CLIENTS: u64 = 32;
    const IDS: u64 = 200;
    let mut tasks = Vec::new();
    for _ in 0..CLIENTS {
        tasks.push(tokio::spawn(async move {
            let mut conn = RawConn::connect(addr).await;
            let mut created = 0u64;
            // Every client tries every id: all but one attempt per id must conflict.
            for id in 1000..1000 + IDS {
                match conn.post_json("/customers", &customer(id)).await.status {
                    201 => created += 1,
                    409 => {}
                    other => panic!("unexpected status {other}"),
                }
            }
            created
        }));
    }
    let mut total = 0;
    for task in tasks {
        total += task.await.unwrap();
    }
    assert_eq!(total, IDS);
    let mut conn = RawConn::connect(addr).await;
    let list = conn.get("/customers").await.json();
    assert_eq!(list.as_array().unwrap().len(), 10);
    for customer in list.as_array().unwrap() {
        assert!(customer["id"].as_u64().unwrap() >= 1000);
    }
}
