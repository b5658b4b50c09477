//! nghttpx (nghttp2's proxy): `nghttpx --conf=nghttpx.conf`, one worker in
//! one process.

use std::{fmt::Write as _, path::Path};

use super::{Setup, Site, Unsupported, UpstreamProtocol};

/// nghttpx on `dir/nghttpx.conf`. It has no check command: starting it is
/// the check (it exits at once on a bad file).
pub(super) fn setup(site: &Site<'_>, dir: &Path) -> Result<Setup, Unsupported> {
    let conf = nghttpx_conf(site, dir)?;
    Ok(Setup::one_file(dir, "nghttpx.conf", conf, &["--conf={}"]))
}

/// nghttpx.conf: every option on the command line would do as well; a
/// file keeps them with the others' in `OUT/work/`.
///
/// `single-process` keeps the worker in the process the bench started
/// (by default a main process forks it, and the worker's CPU and memory
/// would not be the process measured); `backend-keep-alive-timeout` keeps
/// idle upstream connections through the io group's think time (the
/// default, 2 s, is its longest pause).
pub(crate) fn nghttpx_conf(site: &Site<'_>, dir: &Path) -> Result<String, Unsupported> {
    let Site::Proxy(proxy) = site else {
        return Err("nghttpx has no handler that answers a fixed body");
    };
    if proxy.least_conn {
        return Err("nghttpx balances round robin only (no fewest-connections policy)");
    }
    if proxy.handler.is_some() {
        return Err("nghttpx has no rate limit or JWT handler (only mruby scripts)");
    }
    let mut conf = String::new();
    match proxy.tls {
        Some(tls) => {
            let _ = write!(
                conf,
                "frontend={},{}\nprivate-key-file={}\ncertificate-file={}\nno-ocsp=yes\n",
                proxy.listen.ip(),
                proxy.listen.port(),
                tls.key.display(),
                tls.cert.display()
            );
        }
        // A plaintext frontend takes HTTP/1.1 and HTTP/2 with prior knowledge.
        None => {
            let _ = writeln!(
                conf,
                "frontend={},{};no-tls",
                proxy.listen.ip(),
                proxy.listen.port()
            );
        }
    }
    let params = match proxy.upstream_protocol {
        UpstreamProtocol::Http1 => "proto=http/1.1",
        UpstreamProtocol::H2c => "proto=h2",
        // nghttpx checks the certificate's DNS names against the SNI (an
        // IP address matches none): the bench's certificate holds localhost.
        UpstreamProtocol::H2Tls { .. } => "proto=h2;tls;sni=localhost",
    };
    for upstream in proxy.upstreams {
        let _ = writeln!(
            conf,
            "backend={},{};;{params}",
            upstream.ip(),
            upstream.port()
        );
    }
    if let UpstreamProtocol::H2Tls { ca } = proxy.upstream_protocol {
        let _ = writeln!(conf, "cacert={}", ca.display());
    }
    let _ = write!(
        conf,
        "workers=1\nsingle-process=yes\nbackend-keep-alive-timeout=60s\n\
         errorlog-file={}\npid-file={}\n",
        dir.join("error.log").display(),
        dir.join("nghttpx.pid").display()
    );
    Ok(conf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::peers::{addr, test_tls, ProxySite};

    #[test]
    fn frontend_and_backends() {
        let upstreams = [addr(2), addr(3)];
        let tls = test_tls();
        let site = Site::Proxy(ProxySite {
            tls: Some(&tls),
            upstream_protocol: UpstreamProtocol::H2Tls { ca: &tls.ca },
            ..ProxySite::plain(addr(1), &upstreams, 100)
        });
        let conf = nghttpx_conf(&site, Path::new("/w")).expect("supported");
        for needle in [
            "frontend=127.0.0.1,1\nprivate-key-file=/k.pem\ncertificate-file=/c.pem\n",
            "backend=127.0.0.1,2;;proto=h2;tls;sni=localhost\nbackend=127.0.0.1,3;;proto=h2;tls;sni=localhost\n",
            "cacert=/ca.pem\n",
            "workers=1\nsingle-process=yes\n",
        ] {
            assert!(conf.contains(needle), "{needle:?} missing in:\n{conf}");
        }
        let plain = Site::Proxy(ProxySite::plain(addr(1), &upstreams, 100));
        let conf = nghttpx_conf(&plain, Path::new("/w")).expect("supported");
        assert!(conf.contains("frontend=127.0.0.1,1;no-tls\n"), "{conf}");
        assert!(
            conf.contains("backend=127.0.0.1,2;;proto=http/1.1\n"),
            "{conf}"
        );
        let least = Site::Proxy(ProxySite {
            least_conn: true,
            ..ProxySite::plain(addr(1), &upstreams, 100)
        });
        assert!(nghttpx_conf(&least, Path::new("/w")).is_err());
    }
}
