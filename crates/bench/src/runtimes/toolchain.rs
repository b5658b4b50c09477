//! The toolchains that build and run the runtimes, found on PATH with
//! their versions: java and mvn for the JVM backends, go, node.

use std::{path::PathBuf, process::Command};

use crate::machine::find_program;

/// What a runtime needs to be built and run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Toolchain {
    /// java to run, mvn to build.
    Jvm,
    Go,
    Node,
}

/// A program found, with the version it reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tool {
    pub path: PathBuf,
    /// As a report shows it: `OpenJDK 17.0.15`, `Maven 3.8.7`, `Go 1.26.8`, `Node.js 20.20.2`.
    pub version: String,
}

/// The toolchains on this machine.
#[derive(Debug, Clone, Default)]
pub struct Toolchains {
    pub java: Option<Tool>,
    pub maven: Option<Tool>,
    pub go: Option<Tool>,
    pub node: Option<Tool>,
}

impl Toolchains {
    /// Looks each program up on PATH and asks its version (a program that
    /// cannot say it is counted as missing).
    pub fn detect() -> Self {
        Self {
            java: tool("java", &["-version"], java_version),
            maven: tool("mvn", &["-B", "-version"], maven_version),
            go: tool("go", &["version"], go_version),
            node: tool("node", &["--version"], node_version),
        }
    }

    /// Why a toolchain cannot be used, as a one-line note; `None` when it can.
    pub fn missing(&self, toolchain: Toolchain) -> Option<String> {
        let (absent, install): (Vec<&str>, &str) = match toolchain {
            Toolchain::Jvm => (
                [("java", &self.java), ("mvn", &self.maven)]
                    .into_iter()
                    .filter(|(_, tool)| tool.is_none())
                    .map(|(name, _)| name)
                    .collect(),
                "apt-get install -y openjdk-17-jdk-headless maven",
            ),
            Toolchain::Go => (
                self.go.is_none().then_some("go").into_iter().collect(),
                "apt-get install -y golang, or https://go.dev/dl",
            ),
            Toolchain::Node => (
                self.node.is_none().then_some("node").into_iter().collect(),
                "apt-get install -y nodejs",
            ),
        };
        if absent.is_empty() {
            return None;
        }
        let verb = if absent.len() == 1 { "is" } else { "are" };
        Some(format!(
            "{} {verb} not on PATH ({install})",
            absent.join(" and ")
        ))
    }

    /// What runs a runtime of this toolchain (java, the go that compiled it, node).
    pub fn runner(&self, toolchain: Toolchain) -> Option<&Tool> {
        match toolchain {
            Toolchain::Jvm => self.java.as_ref(),
            Toolchain::Go => self.go.as_ref(),
            Toolchain::Node => self.node.as_ref(),
        }
    }
}

fn tool(name: &str, args: &[&str], parse: fn(&str) -> Option<String>) -> Option<Tool> {
    let path = find_program(name)?;
    let output = Command::new(&path).args(args).output().ok()?;
    // java -version writes to stderr, the others to stdout.
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let version = parse(&strip_ansi(&text))?;
    Some(Tool { path, version })
}

/// `openjdk version "17.0.15" 2025-04-15` gives `OpenJDK 17.0.15`;
/// Oracle's `java version "1.8.0_171"` gives `Java 1.8.0_171`.
fn java_version(text: &str) -> Option<String> {
    let line = text.lines().find(|l| l.contains(" version \""))?;
    let vendor = match line.split_whitespace().next()? {
        "openjdk" => "OpenJDK",
        _ => "Java",
    };
    let version = line.split('"').nth(1)?;
    Some(format!("{vendor} {version}"))
}

/// `Apache Maven 3.8.7 (...)` gives `Maven 3.8.7`.
fn maven_version(text: &str) -> Option<String> {
    let line = text.lines().find(|l| l.starts_with("Apache Maven "))?;
    let version = line
        .strip_prefix("Apache Maven ")?
        .split_whitespace()
        .next()?;
    Some(format!("Maven {version}"))
}

/// `go version go1.26.8 linux/amd64` gives `Go 1.26.8`.
fn go_version(text: &str) -> Option<String> {
    let word = text.split_whitespace().find(|w| w.starts_with("go1"))?;
    Some(format!("Go {}", word.strip_prefix("go")?))
}

/// `v20.20.2` gives `Node.js 20.20.2`.
fn node_version(text: &str) -> Option<String> {
    let version = text.trim().strip_prefix('v')?;
    version
        .starts_with(|c: char| c.is_ascii_digit())
        .then(|| format!("Node.js {version}"))
}

/// Drops terminal colour sequences (`ESC [ ... letter`): Maven colours its banner.
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for next in chars.by_ref() {
                if next.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_as_reports_show_them() {
        let java = "openjdk version \"17.0.15\" 2025-04-15\nOpenJDK Runtime Environment (build 17.0.15+6-Debian-1deb12u1)\n";
        assert_eq!(java_version(java).as_deref(), Some("OpenJDK 17.0.15"));
        assert_eq!(
            java_version("java version \"1.8.0_171\"\n").as_deref(),
            Some("Java 1.8.0_171")
        );
        let maven =
            strip_ansi("\u{1b}[1mApache Maven 3.8.7\u{1b}[m\nMaven home: /usr/share/maven\n");
        assert_eq!(maven_version(&maven).as_deref(), Some("Maven 3.8.7"));
        assert_eq!(
            go_version("go version go1.26.8 linux/amd64\n").as_deref(),
            Some("Go 1.26.8")
        );
        assert_eq!(
            node_version("v20.20.2\n").as_deref(),
            Some("Node.js 20.20.2")
        );
        assert_eq!(node_version("garbage"), None);
        assert_eq!(java_version("garbage"), None);
    }

    #[test]
    fn missing_toolchains_are_one_line_notes() {
        let tool = || {
            Some(Tool {
                path: PathBuf::from("/usr/bin/x"),
                version: "x 1".into(),
            })
        };
        let none = Toolchains::default();
        let note = none.missing(Toolchain::Jvm).expect("missing");
        assert!(note.starts_with("java and mvn are not on PATH"), "{note}");
        assert!(!note.contains('\n'));
        let only_java = Toolchains {
            java: tool(),
            ..Toolchains::default()
        };
        let note = only_java.missing(Toolchain::Jvm).expect("missing");
        assert!(note.starts_with("mvn is not on PATH"), "{note}");
        let all = Toolchains {
            java: tool(),
            maven: tool(),
            go: tool(),
            node: tool(),
        };
        for toolchain in [Toolchain::Jvm, Toolchain::Go, Toolchain::Node] {
            assert_eq!(all.missing(toolchain), None);
            assert!(all.runner(toolchain).is_some());
        }
    }
}
