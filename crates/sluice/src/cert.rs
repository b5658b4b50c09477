//! `sluice cert`: a local CA and server and client certificates, for TLS
//! listeners, mTLS and `--cacert` in tests, benchmarks and demos.

use std::{
    fs,
    path::{Path, PathBuf},
    process::ExitCode,
    time::Duration,
};

use anyhow::Context;
use clap::Args;
use tls::{Issued, LocalCa};

#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    sluice cert --out certs\n  \
    sluice cert --out certs --hosts api.test,10.0.0.5 --client backend-1 --days 7\n\n\
Writes into DIR: ca.pem and ca.key.pem (made once, then reused, so that later\n\
certificates share the CA), server.pem and server.key.pem for --hosts, and\n\
client.pem and client.key.pem (common name --client) for mTLS. Keys are mode 0600.\n\
These are for local use: trust ca.pem nowhere else.")]
pub(crate) struct CertArgs {
    /// Directory to write into (created if missing).
    #[arg(long, default_value = "certs")]
    out: PathBuf,
    /// Names and addresses the server certificate is for, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "localhost,127.0.0.1,::1")]
    hosts: Vec<String>,
    /// Common name of the client certificate.
    #[arg(long, default_value = "sluice-client")]
    client: String,
    /// How long the certificates are valid.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3650))]
    days: u64,
}

pub(crate) fn run(args: CertArgs) -> ExitCode {
    match write_all(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("sluice cert: {err:#}");
            ExitCode::from(2)
        }
    }
}

fn write_all(args: &CertArgs) -> anyhow::Result<()> {
    if args.hosts.iter().any(|h| h.trim().is_empty()) {
        anyhow::bail!("--hosts: an empty name");
    }
    let validity = Duration::from_secs(args.days * 86_400);
    fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let (ca_cert, ca_key) = (args.out.join("ca.pem"), args.out.join("ca.key.pem"));
    let ca = if ca_cert.exists() && ca_key.exists() {
        let read = |path: &Path| {
            fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
        };
        LocalCa::from_pem(&read(&ca_cert)?, &read(&ca_key)?, validity)
            .with_context(|| format!("{}: not a usable CA", ca_cert.display()))?
    } else {
        let ca = LocalCa::generate("sluice local CA", validity)?;
        save(&args.out, "ca", &ca.ca)?;
        ca
    };
    let hosts: Vec<String> = args.hosts.iter().map(|h| h.trim().to_string()).collect();
    save(&args.out, "server", &ca.server(&hosts)?)?;
    save(&args.out, "client", &ca.client(&args.client)?)?;
    Ok(())
}

/// `DIR/NAME.pem` and `DIR/NAME.key.pem` (owner-only); prints both paths.
fn save(dir: &Path, name: &str, issued: &Issued) -> anyhow::Result<()> {
    let cert = dir.join(format!("{name}.pem"));
    fs::write(&cert, &issued.cert_pem)
        .with_context(|| format!("cannot write {}", cert.display()))?;
    let key = dir.join(format!("{name}.key.pem"));
    crate::secret::write_private(&key, issued.key_pem.as_bytes())?;
    println!("{}\n{}", cert.display(), key.display());
    Ok(())
}
