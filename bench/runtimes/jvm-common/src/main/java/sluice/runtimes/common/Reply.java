package sluice.runtimes.common;

/**
 * An answer for a framework to send: `body` is a byte array (sent as is) or
 * a value for the framework's Jackson; `location` is null or a relative URI.
 */
public record Reply(int status, String contentType, Object body, String location) {
    public static final String APPLICATION_JSON = "application/json";

    public static Reply json(int status, Object body) {
        return new Reply(status, APPLICATION_JSON, body, null);
    }
}
