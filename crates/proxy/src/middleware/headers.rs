//! `headers`: set, add and remove fields on the request sent upstream and
//! on the response sent to the client.

use std::sync::Arc;

use http::{HeaderName, HeaderValue, StatusCode};

use super::{
    build::{Build, Builder},
    Exchange, Flow, Handler, RequestView,
};
use crate::config::{HeaderFields, HeaderRuleSettings, HeadersSettings};
use crate::wire::edits::HeaderEdits;

#[derive(Debug)]
pub(crate) struct HeaderRewriter {
    request: Rules,
    response: Rules,
}

#[derive(Debug, Default)]
struct Rules {
    remove: Vec<HeaderName>,
    set: Vec<(HeaderName, HeaderValue)>,
    add: Vec<(HeaderName, HeaderValue)>,
}

/// A configured name that the handler may change.
fn editable(name: &HeaderName) -> anyhow::Result<HeaderName> {
    // Fields that frame or route a message: the proxy writes them itself.
    if crate::config::managed_header(name.as_str()) {
        anyhow::bail!(
            "`{name}` is managed by the proxy and cannot be changed here (the Host sent upstream is `upstreams.NAME.host_header`)"
        );
    }
    Ok(name.clone())
}

impl Rules {
    fn new(config: &HeaderRuleSettings) -> anyhow::Result<Self> {
        let pairs = |fields: &HeaderFields| {
            fields
                .0
                .iter()
                .map(|(name, value)| Ok((editable(name)?, value.clone())))
                .collect::<anyhow::Result<Vec<_>>>()
        };
        Ok(Self {
            remove: config
                .remove
                .iter()
                .map(|n| editable(n))
                .collect::<anyhow::Result<_>>()?,
            set: pairs(&config.set)?,
            add: pairs(&config.add)?,
        })
    }

    fn apply(&self, edits: &mut HeaderEdits) {
        edits.remove.extend(self.remove.iter().cloned());
        for (name, value) in &self.set {
            edits.set(name.clone(), value.clone());
        }
        edits.add.extend(self.add.iter().cloned());
    }
}

impl Build for HeadersSettings {
    fn build(&self, _: &mut Builder<'_>) -> anyhow::Result<Arc<dyn Handler>> {
        Ok(Arc::new(HeaderRewriter::new(
            &self.request,
            &self.response,
        )?))
    }
}

impl HeaderRewriter {
    /// The changes of a `headers` handler, or of a route's
    /// `request_headers` and `response_headers`.
    pub(crate) fn new(
        request: &HeaderRuleSettings,
        response: &HeaderRuleSettings,
    ) -> anyhow::Result<Self> {
        Ok(Self {
            request: Rules::new(request)?,
            response: Rules::new(response)?,
        })
    }
}

impl Handler for HeaderRewriter {
    fn request(&self, _request: &RequestView<'_>, exchange: &mut Exchange) -> Flow {
        self.request.apply(&mut exchange.request_headers);
        Flow::Next
    }

    fn response(&self, _status: StatusCode, exchange: &mut Exchange) {
        self.response.apply(&mut exchange.response_headers);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_that_frame_or_route_a_message_cannot_be_edited() {
        for reserved in ["content-length", "host", "connection", "transfer-encoding"] {
            let name = HeaderName::from_static(reserved);
            let err = editable(&name).unwrap_err().to_string();
            assert!(err.contains("managed by the proxy"), "{err}");
        }
        let name = HeaderName::from_static("x-env");
        assert_eq!(editable(&name).unwrap(), name);
        for hop in crate::wire::head::HOP_BY_HOP {
            assert!(editable(&HeaderName::from_static(hop)).is_err(), "{hop}");
        }
    }
}
