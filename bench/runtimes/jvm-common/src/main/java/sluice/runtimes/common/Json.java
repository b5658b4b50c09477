package sluice.runtimes.common;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectReader;
import com.fasterxml.jackson.databind.json.JsonMapper;
import java.io.IOException;
import java.util.Locale;

/** Reading JSON request bodies the way sluice's backends do (crates/backends/src/request.rs). */
public final class Json {
    /** Strict like serde_json: anything after the value is an error. */
    private static final ObjectReader READER = JsonMapper.builder()
            .enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS)
            .build()
            .reader();

    private Json() {}

    /** True for application/json and any application/*+json, parameters ignored. */
    public static boolean isJson(String contentType) {
        if (contentType == null) {
            return false;
        }
        int semicolon = contentType.indexOf(';');
        String essence = (semicolon < 0 ? contentType : contentType.substring(0, semicolon)).trim();
        int slash = essence.indexOf('/');
        if (slash < 0) {
            return false;
        }
        String kind = essence.substring(0, slash);
        String subtype = essence.substring(slash + 1).toLowerCase(Locale.ROOT);
        return kind.equalsIgnoreCase("application")
                && (subtype.equals("json") || (subtype.length() > 5 && subtype.endsWith("+json")));
    }

    /** 415 unless the body is declared JSON; null when it is. */
    public static Reply requireJson(String contentType) {
        return isJson(contentType) ? null : Problem.of(415, "request body must be application/json").reply();
    }

    /** The body as a tree; an empty or malformed body is an IOException. */
    public static JsonNode parse(byte[] body) throws IOException {
        JsonNode node = READER.readTree(body);
        if (node == null || node.isMissingNode()) {
            throw new IOException("EOF while parsing a value");
        }
        return node;
    }

    /** 400 for a body that is not JSON (the detail is the parser's, so it differs from sluice's). */
    public static Reply malformed(IOException error) {
        String message = error instanceof com.fasterxml.jackson.core.JsonProcessingException json
                ? json.getOriginalMessage()
                : error.getMessage();
        return Problem.of(400, "malformed JSON body: " + message).reply();
    }
}
