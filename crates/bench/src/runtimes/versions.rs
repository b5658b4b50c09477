//! The framework versions a report records: as Maven resolved them for the
//! JVM apps (target/dependencies.txt, written by each pom), from the build
//! files otherwise.

use std::path::Path;

use super::{sources, Runtime};

/// The framework's name and versions: resolved by Maven for the JVM apps
/// (target/dependencies.txt), from the build files otherwise.
pub(super) fn framework(runtime: Runtime, dir: &Path) -> String {
    let resolved = |artifacts: &[(&str, &str)]| {
        let listing = std::fs::read_to_string(
            dir.join(runtime.name())
                .join("target")
                .join("dependencies.txt"),
        )
        .unwrap_or_default();
        artifacts
            .iter()
            .map(|(label, artifact)| {
                let version = resolved_version(&listing, artifact).unwrap_or("?");
                format!("{label} {version}")
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    match runtime {
        Runtime::SpringMvc => resolved(&[
            ("Spring Boot", "org.springframework.boot:spring-boot"),
            ("Spring MVC", "org.springframework:spring-webmvc"),
            ("Tomcat", "org.apache.tomcat.embed:tomcat-embed-core"),
        ]),
        Runtime::Webflux => resolved(&[
            ("Spring Boot", "org.springframework.boot:spring-boot"),
            ("Spring WebFlux", "org.springframework:spring-webflux"),
            (
                "Reactor Netty",
                "io.projectreactor.netty:reactor-netty-http",
            ),
        ]),
        Runtime::Grizzly => resolved(&[
            ("Jersey", "org.glassfish.jersey.core:jersey-server"),
            ("Grizzly", "org.glassfish.grizzly:grizzly-http-server"),
            ("Jackson", "com.fasterxml.jackson.core:jackson-databind"),
        ]),
        Runtime::Payara => {
            let version = pom_property(sources::text("pom.xml"), "payara.version");
            format!("Payara Micro {}", version.unwrap_or("?"))
        }
        Runtime::GoHttp => "net/http (standard library)".into(),
        Runtime::Node => "http module (no dependencies)".into(),
    }
}

/// The version of `group:artifact` in `mvn dependency:list` output
/// (`   group:artifact:jar:1.2.3:compile -- module ...`).
fn resolved_version<'a>(listing: &'a str, artifact: &str) -> Option<&'a str> {
    listing.lines().find_map(|line| {
        let coordinates = line.split_whitespace().next()?;
        let rest = coordinates.strip_prefix(artifact)?.strip_prefix(':')?;
        // jar:VERSION:scope, or jar:classifier:VERSION:scope
        let parts: Vec<&str> = rest.split(':').collect();
        match parts.len() {
            3 => Some(parts[1]),
            4 => Some(parts[2]),
            _ => None,
        }
    })
}

/// `<name>value</name>` in a pom's text.
fn pom_property<'a>(pom: &'a str, name: &str) -> Option<&'a str> {
    let open = format!("<{name}>");
    let start = pom.find(&open)? + open.len();
    let end = start + pom[start..].find('<')?;
    Some(pom[start..end].trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_from_the_dependency_listing() {
        let listing = "The following files have been resolved:\n   \
            org.springframework.boot:spring-boot:jar:3.5.16:compile -- module spring.boot [auto]\n   \
            io.netty:netty-transport-native-epoll:jar:linux-x86_64:4.1.135.Final:compile\n";
        assert_eq!(
            resolved_version(listing, "org.springframework.boot:spring-boot"),
            Some("3.5.16")
        );
        assert_eq!(
            resolved_version(listing, "io.netty:netty-transport-native-epoll"),
            Some("4.1.135.Final")
        );
        // A prefix of another artifact's name is not that artifact.
        assert_eq!(
            resolved_version(listing, "org.springframework.boot:spring"),
            None
        );
        assert_eq!(
            pom_property(
                "<p><payara.version> 6.2025.10 </payara.version></p>",
                "payara.version"
            ),
            Some("6.2025.10")
        );
    }
}
