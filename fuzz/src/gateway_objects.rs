//! Gateway API objects as a configuration source
//! (crates/proxy/src/config/gateway/): any bytes as a stream of YAML
//! documents. Whatever the objects say, the listeners, upstreams and
//! routes they make pass the configuration's own checks (what the proxy
//! cannot serve is in the status report, never a broken configuration),
//! and translating the same text twice agrees.

pub fn check(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let first = proxy::fuzzing::gateway_objects(text);
    assert!(first.is_ok(), "{first:?}");
    assert_eq!(first, proxy::fuzzing::gateway_objects(text));
}
