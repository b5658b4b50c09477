package sluice.runtimes.common;

import com.fasterxml.jackson.annotation.JsonInclude;
import java.util.List;

/**
 * An RFC 9457 problem, written field for field like sluice's (crates/http1/src/problem.rs):
 * {"type":"about:blank","title":"Bad Request","status":400,"detail":"...","errors":[...]}.
 */
public record Problem(
        String type,
        String title,
        int status,
        String detail,
        @JsonInclude(JsonInclude.Include.NON_EMPTY) List<Violation> errors) {

    public static final String CONTENT_TYPE = "application/problem+json";

    /** Where a request went wrong: a JSON pointer and what is wrong there. */
    public record Violation(String pointer, String detail) {}

    public static Problem of(int status, String detail) {
        return new Problem("about:blank", reason(status), status, detail, List.of());
    }

    public Problem withErrors(List<Violation> violations) {
        return new Problem(type, title, status, detail, List.copyOf(violations));
    }

    public Reply reply() {
        return new Reply(status, CONTENT_TYPE, this, null);
    }

    /** The canonical reason phrase of a status these backends answer or relay. */
    public static String reason(int status) {
        return switch (status) {
            case 400 -> "Bad Request";
            case 404 -> "Not Found";
            case 409 -> "Conflict";
            case 415 -> "Unsupported Media Type";
            case 500 -> "Internal Server Error";
            case 502 -> "Bad Gateway";
            case 503 -> "Service Unavailable";
            case 504 -> "Gateway Timeout";
            default -> "Error";
        };
    }
}
