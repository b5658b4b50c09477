package sluice.runtimes.common;

import java.io.IOException;
import java.net.URI;
import java.time.Duration;

/**
 * What seeds/003's passthrough answers whatever client it forwards with, as
 * `sluice serve passthrough` does (crates/backends/src/passthrough.rs):
 * POST /passthrough/message takes a JSON message, forwards it unchanged to
 * DOWNSTREAM/messages and relays the answer; 502 when the downstream fails
 * or answers 5xx, 504 past the timeout.
 */
public final class Passthrough {
    public static final Duration CONNECT_TIMEOUT = Duration.ofSeconds(2);
    public static final Duration TIMEOUT = Duration.ofSeconds(10);

    private final URI target;

    /** `downstream` is a base URL such as http://127.0.0.1:8081; messages go to its /messages. */
    public Passthrough(String downstream) {
        URI base = URI.create(downstream);
        String path = base.getPath() == null ? "" : base.getPath().replaceAll("/+$", "");
        this.target = base.resolve(path + "/messages");
    }

    public URI target() {
        return target;
    }

    /** 415 or 400 for a message not worth a trip downstream; null for one to forward. */
    public Reply refuse(String contentType, byte[] body) {
        Reply refused = Json.requireJson(contentType);
        if (refused != null) {
            return refused;
        }
        try {
            Json.parse(body);
            return null;
        } catch (IOException malformed) {
            return Json.malformed(malformed);
        }
    }

    /** The downstream's answer, relayed; a 5xx is a 502. */
    public Reply relay(int status, String contentType, byte[] body) {
        if (status >= 500) {
            return badGateway("answered " + status + " " + Problem.reason(status));
        }
        return new Reply(status, contentType == null ? Reply.APPLICATION_JSON : contentType, body, null);
    }

    public Reply failed(Throwable error) {
        return badGateway("request failed: " + error);
    }

    public Reply timedOut() {
        return Problem.of(504, "downstream " + target + " did not answer within " + TIMEOUT.toSeconds() + "s")
                .reply();
    }

    private Reply badGateway(String detail) {
        return Problem.of(502, "downstream " + target + " " + detail).reply();
    }
}
