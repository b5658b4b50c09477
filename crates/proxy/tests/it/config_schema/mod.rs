//! One schema (issue 50): the JSON Schema generated from the configuration
//! types validates every example and rejects misspelt keys (also by
//! Python's jsonschema, an independent validator); `/config`, which is
//! those types serialised, shows every key of that schema with its value
//! and no secret.

pub(crate) mod keys;

use std::{
    collections::BTreeSet,
    net::SocketAddr,
    path::{Path, PathBuf},
};

use serde_json::Value;
use testkit::RawConn;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The proxy configurations among the repository's examples: every YAML
/// file of examples/ but the Gateway API objects (`k8s/`), and the
/// container image's configuration.
fn examples() -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut dirs = vec![root().join("examples")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() && !path.ends_with("k8s") {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "yaml") {
                found.push(path);
            }
        }
    }
    found.sort();
    assert!(found.len() >= 2, "{found:?}");
    found.push(root().join("deploy/rootfs/etc/sluice/sluice.yaml"));
    found
}

/// The file as the loader reads it: `${VAR:default}` with its defaults.
fn document(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    proxy::config::document(&text, path, |_| None).unwrap()
}

fn validator(schema: &Value) -> jsonschema::Validator {
    jsonschema::validator_for(schema).expect("a valid JSON Schema")
}

/// The errors of `document` against `schema`, one line each.
fn errors(validator: &jsonschema::Validator, document: &Value) -> Vec<String> {
    validator
        .iter_errors(document)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

/// `value` with every scalar `null`: its keys alone. Redaction changes
/// values (a marker where a secret was), never which keys there are.
fn skeleton(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), skeleton(v))).collect())
        }
        Value::Array(items) => Value::Array(items.iter().map(skeleton).collect()),
        _ => Value::Null,
    }
}

#[test]
fn the_schema_validates_every_example_and_rejects_a_misspelt_key() {
    let schema = proxy::config::json_schema();
    let validator = validator(&schema);
    for path in examples() {
        let document = document(&path);
        let errors = errors(&validator, &document);
        assert!(errors.is_empty(), "{}: {errors:#?}", path.display());
    }
    let petstore = document(&root().join("examples/petstore.yaml"));
    let misspelt = |pointer: &str, key: &str| {
        let mut document = petstore.clone();
        let object = document.pointer_mut(pointer).unwrap().as_object_mut();
        object.unwrap().insert(key.into(), Value::from(2));
        document
    };
    for (pointer, key) in [
        ("", "worker"),
        ("/upstreams/petstore", "retires"),
        ("/upstreams/petstore/timeouts", "conect"),
        ("/limits", "max_body_byte"),
        ("/middleware/jwt", "algoritms"),
        ("/routes/0", "upstreams"),
        ("/admin", "tokn"),
    ] {
        let wrong = misspelt(pointer, key);
        let errors = errors(&validator, &wrong);
        assert!(
            errors.iter().any(|e| e.contains(key)),
            "{pointer}/{key} is not rejected: {errors:?}"
        );
    }
    // A handler instance of another name says its type.
    let mut other = petstore.clone();
    other["middleware"]["auth"] = serde_json::json!({ "jwt": { "algorithms": ["RS256"] } });
    assert!(errors(&validator, &other).is_empty());
    other["middleware"]["auth"] = serde_json::json!({ "jwtt": { "algorithms": ["RS256"] } });
    assert!(!errors(&validator, &other).is_empty());
    // Durations and sizes are the file's text.
    let mut units = petstore.clone();
    units["limits"]["max_body_bytes"] = "1 MB".into();
    units["limits"]["idle_timeout"] = "1m 30s".into();
    assert!(errors(&validator, &units).is_empty());
    units["limits"]["idle_timeout"] = "soon".into();
    assert!(!errors(&validator, &units).is_empty());
}

#[test]
fn python_jsonschema_agrees() {
    let test = "python_jsonschema_agrees";
    let found = std::process::Command::new("python3")
        .args(["-c", "import jsonschema"])
        .status();
    if !found.is_ok_and(|s| s.success()) {
        testkit::skip(
            test,
            testkit::Need::PyJsonschema,
            "python3 cannot import jsonschema (pip install jsonschema)",
        );
        return;
    }
    let dir = std::env::temp_dir().join(format!("sluice-schema-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let schema = dir.join("schema.json");
    std::fs::write(&schema, proxy::config::json_schema().to_string()).unwrap();
    let mut documents = Vec::new();
    for (i, path) in examples().iter().enumerate() {
        let file = dir.join(format!("example-{i}.json"));
        std::fs::write(&file, document(path).to_string()).unwrap();
        documents.push((file, true));
    }
    let mut wrong = document(&root().join("examples/petstore.yaml"));
    wrong["limits"]["max_body_byte"] = 1.into();
    let file = dir.join("misspelt.json");
    std::fs::write(&file, wrong.to_string()).unwrap();
    documents.push((file, false));
    let script = "import json, sys, jsonschema\n\
        schema = json.load(open(sys.argv[1]))\n\
        jsonschema.Draft202012Validator.check_schema(schema)\n\
        v = jsonschema.Draft202012Validator(schema)\n\
        for path in sys.argv[2:]:\n\
        \x20   errors = [e.message for e in v.iter_errors(json.load(open(path)))]\n\
        \x20   print(path, 'valid' if not errors else 'invalid', errors[:3])\n";
    let output = std::process::Command::new("python3")
        .args(["-c", script])
        .arg(&schema)
        .args(documents.iter().map(|(f, _)| f))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for (file, valid) in &documents {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(&*file.to_string_lossy()))
            .unwrap_or_else(|| panic!("no verdict for {}: {stdout}", file.display()));
        let verdict = if *valid { " valid " } else { " invalid " };
        assert!(line.contains(verdict), "{line}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The configurations that use every key between them, each read by the
/// loader (`${VAR}`s: the files the test makes).
fn every_key(lookup: &dyn Fn(&str) -> Option<String>) -> Vec<(String, proxy::config::Config)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/config_schema");
    let mut found: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    found.sort();
    found
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).unwrap();
            let config =
                proxy::config::parse(&text, &path, lookup).unwrap_or_else(|err| panic!("{err}"));
            (text, config)
        })
        .collect()
}

/// Files the every-key configurations name.
fn every_key_files() -> impl Fn(&str) -> Option<String> {
    let dir = std::env::temp_dir().join(format!("sluice-every-key-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let token = dir.join("admin-token");
    std::fs::write(&token, "a-token-from-a-file-0123\n").unwrap();
    let root = root();
    move |name: &str| match name {
        "TOKEN_FILE" => Some(token.display().to_string()),
        "GATEWAY_FILES" => Some(root.join("examples/gateway-api/k8s").display().to_string()),
        "STICKY_KEY" => Some("sticky-key-from-the-environment".into()),
        _ => None,
    }
}

#[test]
fn every_key_is_used_and_shown() {
    let schema = proxy::config::json_schema();
    let strict = validator(&proxy::config::every_key_required(&schema));
    let lookup = every_key_files();
    let configs = every_key(&lookup);
    let mut used = BTreeSet::new();
    for (text, config) in &configs {
        let document = proxy::config::document(text, Path::new("t.yaml"), &lookup).unwrap();
        used.extend(keys::of_document(&schema, &document));
        // The configuration as /config serialises it has every key,
        // defaults filled in, and hiding secrets takes none away.
        let serialised = serde_json::to_value(config).unwrap();
        let errors = errors(&strict, &serialised);
        assert!(errors.is_empty(), "{errors:#?}");
        assert_eq!(
            skeleton(&proxy::shown_config(config)),
            skeleton(&serialised)
        );
    }
    let all = keys::of_schema(&schema);
    let unused: Vec<&String> = all.difference(&used).collect();
    assert!(
        unused.is_empty(),
        "keys no every_key*.yaml uses: {unused:#?}"
    );
    assert!(all.len() > 250, "{}", all.len());
}

/// `GET /config` from the admin listener at `admin`.
async fn config_of(admin: SocketAddr, token: Option<&str>) -> Value {
    let mut conn = RawConn::connect(admin).await;
    let authorization = token.map_or(String::new(), |t| format!("authorization: Bearer {t}\r\n"));
    conn.send(format!(
        "GET /config HTTP/1.1\r\nhost: localhost\r\n{authorization}\r\n"
    ))
    .await;
    let response = conn.read_response(false).await;
    assert_eq!(response.status, 200, "{}", response.text());
    response.json()
}

#[tokio::test]
async fn config_of_every_example_shows_every_key() {
    let strict = validator(&proxy::config::every_key_required(
        &proxy::config::json_schema(),
    ));
    let root = root();
    let lookup = |name: &str| match name {
        "SLUICE_LISTEN" | "SLUICE_ADMIN" => Some("127.0.0.1:0".to_string()),
        "SLUICE_SPEC" => Some(root.join("specs/petstore.yaml").display().to_string()),
        "SLUICE_JWKS" => Some(root.join("examples/keys/jwks.json").display().to_string()),
        _ => None,
    };
    for path in examples() {
        // Ports of the test's own choosing.
        let text = std::fs::read_to_string(&path)
            .unwrap()
            .replace("127.0.0.1:9901", "127.0.0.1:0")
            .replace("{ 80: 8000 }", "{ 80: 0 }");
        let config = proxy::config::parse(&text, &path, lookup).unwrap();
        let running = proxy::start(&config).expect("start the proxy");
        let mut shown = config_of(running.admin.unwrap(), None).await;
        running.shutdown();
        assert!(shown["reload"].is_object(), "{shown}");
        // The reload status is not configuration; the rest is the
        // configuration serialised (every key), secrets hidden.
        shown.as_object_mut().unwrap().remove("reload");
        let serialised = serde_json::to_value(&config).unwrap();
        let errors = errors(&strict, &serialised);
        assert!(errors.is_empty(), "{}: {errors:#?}", path.display());
        assert_eq!(
            skeleton(&shown),
            skeleton(&serialised),
            "{}",
            path.display()
        );
    }
}

#[tokio::test]
async fn secrets_stay_hidden() {
    let secrets = [
        ("ADMIN_TOKEN", "admin-token-0123456789"),
        ("STICKY", "sticky-hmac-key-material"),
        ("API_KEY", "inline-api-key-abcdef"),
        ("REDIS_PASSWORD", "redis-password-xyz"),
        ("HEADER", "x-secret-header-value"),
        ("LEVEL", "sluice=warn,info"),
    ];
    let lookup = |name: &str| {
        secrets
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.to_string())
    };
    let yaml = "workers: 1\n\
        listeners: [{ address: 127.0.0.1:0 }]\n\
        admin: { address: 127.0.0.1:0, token: \"${ADMIN_TOKEN}\" }\n\
        upstreams:\n\
        \x20 a:\n\
        \x20   hosts: [\"http://user:pass-in-url@127.0.0.1:9\"]\n\
        \x20   sticky: { cookie: srv, key: \"${STICKY}\" }\n\
        middleware:\n\
        \x20 api_key: { keys: { ci: \"${API_KEY}\", literal: written-in-the-file-0 } }\n\
        \x20 rate_limit: { rate: 10/s, store: redis, redis: { url: \"redis://u:${REDIS_PASSWORD}@127.0.0.1:6379\" } }\n\
        \x20 headers: { request: { set: { x-upstream-auth: \"${HEADER}\" } } }\n\
        routes: [{ path: /, upstream: a, chain: [api_key, headers] }]\n\
        log: { level: \"${LEVEL}\" }\n";
    let config = proxy::config::parse(yaml, Path::new("t.yaml"), lookup).unwrap();
    let debug = format!("{config:?}");
    for secret in [
        "admin-token-0123456789",
        "sticky-hmac-key-material",
        "inline-api-key-abcdef",
        "written-in-the-file-0",
        "redis-password-xyz",
    ] {
        assert!(!debug.contains(secret), "Debug shows {secret}");
    }
    // The Redis URL is shown without its password, with its host.
    assert!(debug.contains("@127.0.0.1:6379"), "{debug}");
    let running = proxy::start(&config).expect("start the proxy");
    let admin = running.admin.unwrap();
    let mut conn = RawConn::connect(admin).await;
    conn.send("GET /config HTTP/1.1\r\nhost: localhost\r\n\r\n")
        .await;
    assert_eq!(conn.read_response(false).await.status, 401);
    let shown = config_of(admin, Some("admin-token-0123456789")).await;
    running.shutdown();
    let text = shown.to_string();
    for secret in secrets
        .iter()
        .map(|(_, v)| *v)
        .chain(["pass-in-url", "written-in-the-file-0"])
    {
        assert!(!text.contains(secret), "/config shows {secret}: {text}");
    }
    let marker = proxy::config::redacted_marker;
    assert_eq!(shown["admin"]["token"], marker("admin-token-0123456789"));
    assert_eq!(
        shown["upstreams"]["a"]["sticky"]["key"],
        marker("sticky-hmac-key-material")
    );
    assert_eq!(
        shown["middleware"]["api_key"]["keys"]["literal"],
        marker("written-in-the-file-0")
    );
    assert!(shown["upstreams"]["a"]["hosts"][0]["url"]
        .as_str()
        .unwrap()
        .starts_with("http://(redacted sha256:"));
    // What is not secret is shown as it is.
    assert_eq!(shown["upstreams"]["a"]["sticky"]["cookie"], "srv");
    assert_eq!(shown["limits"]["idle_timeout"], "1m");
    assert_eq!(shown["middleware"]["rate_limit"]["rate"], "10/s");
}
