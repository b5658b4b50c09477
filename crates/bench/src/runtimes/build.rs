//! Building a runtime on first use into a cache folder named by the hash of
//! its sources and toolchain, and the command line that starts it.

use std::{
    fmt,
    fs::File,
    io::{BufRead, BufReader, Read, Seek, SeekFrom, Write},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use anyhow::{bail, Context};

use super::{sources, versions::framework, Runtime, Toolchain, Toolchains};

/// Bumped when the build commands below change, so that old outputs are not reused.
const RECIPE: &str = "runtimes-build-1";
/// Log bytes quoted when a build fails.
const LOG_TAIL: u64 = 3000;

/// `$XDG_CACHE_HOME/sluice/runtimes`, else `~/.cache/sluice/runtimes`.
pub fn default_cache_dir() -> PathBuf {
    crate::machine::cache_dir().join("runtimes")
}

/// What [`prepare`] reports as it goes.
#[derive(Debug, Clone, Copy)]
pub enum BuildEvent<'a> {
    /// Built before: nothing to do.
    Cached {
        runtime: Runtime,
        dir: &'a Path,
    },
    /// A build starts (the first one of a JVM runtime downloads its
    /// dependencies from Maven Central and takes a while).
    Started {
        runtime: Runtime,
        command: &'a str,
        dir: &'a Path,
    },
    /// A line the build tool printed (Maven names each download).
    Output {
        runtime: Runtime,
        line: &'a str,
    },
    Finished {
        runtime: Runtime,
        elapsed: Duration,
    },
}

/// A runtime ready to start, or why it cannot be.
#[derive(Debug, Clone)]
pub enum Outcome {
    Ready(Built),
    /// Its toolchain is missing: a one-line note such as `go-http skipped:
    /// go is not on PATH (...)`.
    Skipped(String),
}

/// A built runtime.
#[derive(Debug, Clone)]
pub struct Built {
    pub runtime: Runtime,
    /// Its cache folder: the sources, the build's outputs and build.log.
    pub dir: PathBuf,
    /// What runs it: `OpenJDK 17.0.15`, `Go 1.26.8` (the compiler), `Node.js 20.20.2`.
    pub runtime_version: String,
    /// The framework as the build resolved it: `Spring Boot 3.5.16, Spring
    /// MVC 6.2.19, Tomcat 10.1.55`.
    pub framework: String,
    /// How long this call built it; `None` when it came from the cache.
    pub build_time: Option<Duration>,
    runner: PathBuf,
}

/// A program and its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandLine {
    pub program: PathBuf,
    pub args: Vec<String>,
}

impl CommandLine {
    pub fn to_command(&self) -> Command {
        let mut command = Command::new(&self.program);
        command.args(&self.args);
        command
    }
}

impl fmt::Display for CommandLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.program.display())?;
        for arg in &self.args {
            write!(f, " {arg}")?;
        }
        Ok(())
    }
}

impl Built {
    /// The command that serves this runtime on `127.0.0.1:port` (loopback
    /// only). `downstream` is the base URL its passthrough forwards to
    /// (`/messages` is appended); runtimes without one ignore it.
    pub fn command(&self, port: u16, downstream: Option<&str>) -> CommandLine {
        let path = |relative: &str| self.dir.join(relative).display().to_string();
        let port = port.to_string();
        let args: Vec<String> = match self.runtime {
            Runtime::SpringMvc | Runtime::Webflux => {
                let name = self.runtime.name();
                let mut args = vec![
                    "-jar".into(),
                    path(&format!("{name}/target/{name}.jar")),
                    format!("--server.port={port}"),
                    "--server.address=127.0.0.1".into(),
                ];
                args.extend(downstream.map(|url| format!("--downstream={url}")));
                args
            }
            Runtime::Grizzly => vec![
                "-jar".into(),
                path("grizzly/target/grizzly.jar"),
                "--port".into(),
                port,
                "--host".into(),
                "127.0.0.1".into(),
            ],
            Runtime::Payara => vec![
                "-jar".into(),
                path("payara/target/payara-micro.jar"),
                "--nocluster".into(),
                "--disablephonehome".into(),
                "--port".into(),
                port,
                // Binds 127.0.0.1 and lifts the keep-alive request limit.
                "--prebootcommandfile".into(),
                path("payara/preboot.asadmin"),
                "--deploy".into(),
                path("payara/target/ROOT.war"),
            ],
            Runtime::GoHttp => vec!["-port".into(), port, "-host".into(), "127.0.0.1".into()],
            Runtime::Node => vec![
                path("node/server.js"),
                "--port".into(),
                port,
                "--host".into(),
                "127.0.0.1".into(),
            ],
        };
        let program = match self.runtime {
            Runtime::GoHttp => self.dir.join("go-http/go-http"),
            _ => self.runner.clone(),
        };
        CommandLine { program, args }
    }
}

/// Builds `runtime` into `cache_dir` unless it is there already. A missing
/// toolchain is [`Outcome::Skipped`]; a build that fails is an error that
/// quotes the end of its log.
pub fn prepare(
    runtime: Runtime,
    toolchains: &Toolchains,
    cache_dir: &Path,
    progress: &mut dyn FnMut(BuildEvent<'_>),
) -> anyhow::Result<Outcome> {
    let toolchain = runtime.toolchain();
    if let Some(missing) = toolchains.missing(toolchain) {
        return Ok(Outcome::Skipped(format!("{runtime} skipped: {missing}")));
    }
    let Some(runner) = toolchains.runner(toolchain) else {
        return Ok(Outcome::Skipped(format!("{runtime} skipped: no runner")));
    };
    let files = sources::files_for(runtime);
    let build = build_command(runtime, toolchains);
    let recipe = format!(
        "{RECIPE} {} {}",
        build.as_ref().map_or(String::new(), |(_, c)| c.to_string()),
        versions(toolchains, toolchain)
    );
    let name = format!("{runtime}-{}", sources::hash(&files, &recipe));
    let dir = cache_dir.join(&name);
    let mut built = Built {
        runtime,
        dir: dir.clone(),
        runtime_version: runner.version.clone(),
        framework: String::new(),
        build_time: None,
        runner: runner.path.clone(),
    };
    if dir.is_dir() {
        progress(BuildEvent::Cached { runtime, dir: &dir });
    } else {
        let started = Instant::now();
        let partial = cache_dir.join(format!(".{name}.{}.partial", std::process::id()));
        let _ = std::fs::remove_dir_all(&partial);
        sources::write_into(&partial, &files)?;
        if let Some((workdir, command)) = &build {
            if let Err(err) = run_build(runtime, &partial, workdir, command, progress) {
                let failed = cache_dir.join(format!("{name}.failed"));
                let _ = std::fs::remove_dir_all(&failed);
                let _ = std::fs::rename(&partial, &failed);
                return Err(err.context(format!(
                    "building {runtime} failed (sources and build.log kept in {})",
                    failed.display()
                )));
            }
        }
        if let Err(err) = std::fs::rename(&partial, &dir) {
            // Another process may have finished the same build first: theirs is as good.
            if !dir.is_dir() {
                return Err(err).with_context(|| {
                    format!("cannot move {} to {}", partial.display(), dir.display())
                });
            }
            let _ = std::fs::remove_dir_all(&partial);
        }
        let elapsed = started.elapsed();
        built.build_time = Some(elapsed);
        progress(BuildEvent::Finished { runtime, elapsed });
    }
    built.framework = framework(runtime, &dir);
    Ok(Outcome::Ready(built))
}

/// The folder to run in (relative to the sources) and the build command.
fn build_command(runtime: Runtime, toolchains: &Toolchains) -> Option<(String, CommandLine)> {
    match runtime.toolchain() {
        Toolchain::Jvm => {
            let maven = toolchains.maven.as_ref()?;
            let args = [
                "-B",
                "-Dstyle.color=never",
                "-pl",
                runtime.name(),
                "-am",
                "package",
            ];
            Some((
                String::new(),
                CommandLine {
                    program: maven.path.clone(),
                    args: args.map(String::from).to_vec(),
                },
            ))
        }
        Toolchain::Go => {
            let go = toolchains.go.as_ref()?;
            let args = ["build", "-trimpath", "-o", "go-http", "."];
            Some((
                "go-http".into(),
                CommandLine {
                    program: go.path.clone(),
                    args: args.map(String::from).to_vec(),
                },
            ))
        }
        // Node runs server.js as it is.
        Toolchain::Node => None,
    }
}

fn versions(toolchains: &Toolchains, toolchain: Toolchain) -> String {
    let tools = match toolchain {
        Toolchain::Jvm => vec![&toolchains.java, &toolchains.maven],
        Toolchain::Go => vec![&toolchains.go],
        Toolchain::Node => vec![&toolchains.node],
    };
    tools
        .into_iter()
        .flatten()
        .map(|tool| tool.version.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Runs the build in `root/workdir`, passing each output line to
/// `progress` and into root/build.log.
fn run_build(
    runtime: Runtime,
    root: &Path,
    workdir: &str,
    command: &CommandLine,
    progress: &mut dyn FnMut(BuildEvent<'_>),
) -> anyhow::Result<()> {
    let log_path = root.join("build.log");
    let mut log =
        File::create(&log_path).with_context(|| format!("cannot create {}", log_path.display()))?;
    let shown = command.to_string();
    progress(BuildEvent::Started {
        runtime,
        command: &shown,
        dir: root,
    });
    let mut child = command
        .to_command()
        .current_dir(root.join(workdir))
        // Never fetch another Go toolchain: build with the one found.
        .env("GOTOOLCHAIN", "local")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot run {shown}"))?;
    let (sender, lines) = mpsc::channel::<String>();
    let mut readers = Vec::new();
    let stdout = child
        .stdout
        .take()
        .map(|s| Box::new(s) as Box<dyn Read + Send>);
    let stderr = child
        .stderr
        .take()
        .map(|s| Box::new(s) as Box<dyn Read + Send>);
    for stream in [stdout, stderr].into_iter().flatten() {
        let sender = sender.clone();
        readers.push(std::thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                if sender.send(line).is_err() {
                    break;
                }
            }
        }));
    }
    drop(sender);
    for line in lines {
        let _ = writeln!(log, "{line}");
        progress(BuildEvent::Output {
            runtime,
            line: &line,
        });
    }
    for reader in readers {
        let _ = reader.join();
    }
    let status = child.wait().context("cannot wait for the build")?;
    if !status.success() {
        bail!(
            "`{shown}` exited with {status}; the end of {}:\n{}",
            log_path.display(),
            log_tail(&log_path)
        );
    }
    Ok(())
}

fn log_tail(path: &Path) -> String {
    let Ok(mut file) = File::open(path) else {
        return String::new();
    };
    let len = file.metadata().map_or(0, |m| m.len());
    let _ = file.seek(SeekFrom::Start(len.saturating_sub(LOG_TAIL)));
    let mut text = String::new();
    let _ = file.read_to_string(&mut text);
    text.trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtimes::Tool;

    fn tool(path: &str, version: &str) -> Option<Tool> {
        Some(Tool {
            path: PathBuf::from(path),
            version: version.into(),
        })
    }

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("bench-runtimes-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn a_missing_toolchain_is_a_skip_note() {
        let outcome = prepare(
            Runtime::GoHttp,
            &Toolchains::default(),
            &scratch("skip"),
            &mut |_| panic!("nothing to report"),
        )
        .expect("a skip is not an error");
        match outcome {
            Outcome::Skipped(note) => assert!(
                note.starts_with("go-http skipped: go is not on PATH"),
                "{note}"
            ),
            Outcome::Ready(_) => panic!("built without go"),
        }
    }

    #[test]
    fn node_is_written_once_then_found_in_the_cache() {
        let cache = scratch("node");
        let toolchains = Toolchains {
            node: tool("/usr/bin/node", "Node.js 20.20.2"),
            ..Toolchains::default()
        };
        let mut events = Vec::new();
        let Outcome::Ready(first) = prepare(Runtime::Node, &toolchains, &cache, &mut |e| {
            events.push(format!("{e:?}"))
        })
        .expect("prepared") else {
            panic!("skipped")
        };
        assert!(first.build_time.is_some());
        assert!(first.dir.join("node/server.js").is_file());
        assert!(first
            .dir
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("node-")));
        assert_eq!(first.runtime_version, "Node.js 20.20.2");
        let Outcome::Ready(again) = prepare(Runtime::Node, &toolchains, &cache, &mut |e| {
            events.push(format!("{e:?}"))
        })
        .expect("prepared") else {
            panic!("skipped")
        };
        assert_eq!(again.dir, first.dir);
        assert_eq!(again.build_time, None);
        assert!(events[0].starts_with("Finished"), "{events:?}");
        assert!(events[1].starts_with("Cached"), "{events:?}");
        let command = again.command(8080, None);
        assert_eq!(command.program, PathBuf::from("/usr/bin/node"));
        assert_eq!(command.args[1..], ["--port", "8080", "--host", "127.0.0.1"]);
        let _ = std::fs::remove_dir_all(&cache);
    }

    #[test]
    fn command_lines_listen_on_loopback_at_the_port() {
        let built = |runtime| Built {
            runtime,
            dir: PathBuf::from("/cache/x"),
            runtime_version: String::new(),
            framework: String::new(),
            build_time: None,
            runner: PathBuf::from("/usr/bin/java"),
        };
        let mvc = built(Runtime::SpringMvc).command(9000, Some("http://127.0.0.1:9001"));
        assert_eq!(
            mvc.to_string(),
            "/usr/bin/java -jar /cache/x/spring-mvc/target/spring-mvc.jar --server.port=9000 \
             --server.address=127.0.0.1 --downstream=http://127.0.0.1:9001"
        );
        let go = built(Runtime::GoHttp).command(9000, Some("ignored"));
        assert_eq!(
            go.to_string(),
            "/cache/x/go-http/go-http -port 9000 -host 127.0.0.1"
        );
        let payara = built(Runtime::Payara).command(9000, None).to_string();
        assert!(payara.contains("--port 9000"), "{payara}");
        assert!(
            payara.ends_with("--deploy /cache/x/payara/target/ROOT.war"),
            "{payara}"
        );
        let grizzly = built(Runtime::Grizzly).command(9000, None).to_string();
        assert!(
            grizzly.ends_with("grizzly.jar --port 9000 --host 127.0.0.1"),
            "{grizzly}"
        );
    }
}
